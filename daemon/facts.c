/* softaffd — the facts of the backend contract (sa-backend.h): built by backends, owned by the
 * core. Its own library, so that a backend's unit test links it without the core. */
#include "sa-backend.h"

SaVmFacts *sa_vm_facts_new(const char *key, const char *name)
{
    SaVmFacts *f = g_new0(SaVmFacts, 1);
    f->key = g_strdup(key);
    f->name = g_strdup(name);
    sa_metadata_init(&f->settings);
    return f;
}

void sa_vm_facts_free(SaVmFacts *f)
{
    if (!f)
        return;
    g_free(f->key);
    g_free(f->name);
    if (f->vcpu_tids)
        g_array_unref(f->vcpu_tids);
    sa_cpuset_free(f->vcpu_cpuset);
    if (f->vcpu_pins)
        g_ptr_array_unref(f->vcpu_pins);
    sa_cpuset_free(f->emulator_pin);
    if (f->iothread_ids)
        g_array_unref(f->iothread_ids);
    if (f->iothread_pins)
        g_ptr_array_unref(f->iothread_pins);
    g_free(f->settings_error);
    g_free(f->flavor);
    g_free(f->title);
    g_free(f->description);
    g_free(f);
}
