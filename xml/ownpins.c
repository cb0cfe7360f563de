/* softaff — SaOwnPins: a VM's own thread settings, as softaffd records them. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-metadata.h"

SaOwnPins *sa_own_pins_new(void)
{
    return g_new0(SaOwnPins, 1);
}

static GPtrArray *new_set_array(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
}

static gpointer copy_set(gconstpointer set, gpointer unused)
{
    return set != NULL ? sa_cpuset_copy(set) : NULL;
}

SaOwnPins *sa_own_pins_copy(const SaOwnPins *pins)
{
    g_return_val_if_fail(pins != NULL, NULL);

    SaOwnPins *c = sa_own_pins_new();
    c->n_vcpus = pins->n_vcpus;
    c->vcpu_cpuset = pins->vcpu_cpuset != NULL ? sa_cpuset_copy(pins->vcpu_cpuset) : NULL;
    c->emulatorpin = pins->emulatorpin != NULL ? sa_cpuset_copy(pins->emulatorpin) : NULL;
    if (pins->vcpupin != NULL) {
        c->vcpupin = g_ptr_array_copy(pins->vcpupin, copy_set, NULL);
        g_ptr_array_set_free_func(c->vcpupin, (GDestroyNotify)sa_cpuset_free);
    }
    if (pins->iothread_ids != NULL) {
        c->iothread_ids = g_array_copy(pins->iothread_ids);
        c->iothreadpin = g_ptr_array_copy(pins->iothreadpin, copy_set, NULL);
        g_ptr_array_set_free_func(c->iothreadpin, (GDestroyNotify)sa_cpuset_free);
    }
    return c;
}

void sa_own_pins_free(SaOwnPins *pins)
{
    if (pins == NULL)
        return;
    g_clear_pointer(&pins->vcpu_cpuset, sa_cpuset_free);
    g_clear_pointer(&pins->vcpupin, g_ptr_array_unref);
    g_clear_pointer(&pins->emulatorpin, sa_cpuset_free);
    g_clear_pointer(&pins->iothread_ids, g_array_unref);
    g_clear_pointer(&pins->iothreadpin, g_ptr_array_unref);
    g_free(pins);
}

/* Both NULL, or both sets and equal. */
static bool same_set(const SaCpuSet *a, const SaCpuSet *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return sa_cpuset_equal(a, b);
}

static const SaCpuSet *vcpu_pin(const SaOwnPins *pins, guint vcpu)
{
    if (pins->vcpupin == NULL || vcpu >= pins->vcpupin->len)
        return NULL;
    return g_ptr_array_index(pins->vcpupin, vcpu);
}

/* Every I/O thread pin of a is in b, the same. */
static bool iothreads_within(const SaOwnPins *a, const SaOwnPins *b)
{
    for (guint i = 0; a->iothread_ids != NULL && i < a->iothread_ids->len; i++) {
        guint id = g_array_index(a->iothread_ids, guint, i);
        if (!same_set(g_ptr_array_index(a->iothreadpin, i), sa_own_pins_iothread(b, id)))
            return false;
    }
    return true;
}

/* By meaning: a missing vcpupin tail is no pin, the order of I/O thread pins does not count. */
bool sa_own_pins_equal(const SaOwnPins *a, const SaOwnPins *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a->n_vcpus != b->n_vcpus || !same_set(a->vcpu_cpuset, b->vcpu_cpuset) ||
        !same_set(a->emulatorpin, b->emulatorpin))
        return false;
    guint n =
        MAX(a->vcpupin != NULL ? a->vcpupin->len : 0, b->vcpupin != NULL ? b->vcpupin->len : 0);
    for (guint v = 0; v < n; v++)
        if (!same_set(vcpu_pin(a, v), vcpu_pin(b, v)))
            return false;
    return iothreads_within(a, b) && iothreads_within(b, a);
}

static int iothread_index(const SaOwnPins *pins, guint id)
{
    for (guint i = 0; pins->iothread_ids != NULL && i < pins->iothread_ids->len; i++)
        if (g_array_index(pins->iothread_ids, guint, i) == id)
            return (int)i;
    return -1;
}

const SaCpuSet *sa_own_pins_iothread(const SaOwnPins *pins, guint id)
{
    g_return_val_if_fail(pins != NULL, NULL);

    int i = iothread_index(pins, id);
    return i >= 0 ? g_ptr_array_index(pins->iothreadpin, i) : NULL;
}

void sa_own_pins_set_vcpu(SaOwnPins *pins, guint vcpu, const SaCpuSet *set)
{
    g_return_if_fail(pins != NULL);
    g_return_if_fail(vcpu < G_MAXINT);

    if (set == NULL) {
        if (pins->vcpupin == NULL || vcpu >= pins->vcpupin->len)
            return;
        g_clear_pointer(&g_ptr_array_index(pins->vcpupin, vcpu), sa_cpuset_free);
        /* No NULL tail, no array without a pin: one form per meaning. */
        guint len = pins->vcpupin->len;
        while (len > 0 && g_ptr_array_index(pins->vcpupin, len - 1) == NULL)
            len--;
        if (len == 0)
            g_clear_pointer(&pins->vcpupin, g_ptr_array_unref);
        else
            g_ptr_array_set_size(pins->vcpupin, (gint)len);
        return;
    }
    if (pins->vcpupin == NULL)
        pins->vcpupin = new_set_array();
    if (pins->vcpupin->len <= vcpu)
        g_ptr_array_set_size(pins->vcpupin, (gint)vcpu + 1);
    sa_cpuset_free(g_ptr_array_index(pins->vcpupin, vcpu));
    g_ptr_array_index(pins->vcpupin, vcpu) = sa_cpuset_copy(set);
}

void sa_own_pins_set_iothread(SaOwnPins *pins, guint id, const SaCpuSet *set)
{
    g_return_if_fail(pins != NULL);
    g_return_if_fail(id >= 1);

    int i = iothread_index(pins, id);
    if (set == NULL) {
        if (i < 0)
            return;
        g_array_remove_index(pins->iothread_ids, (guint)i);
        g_ptr_array_remove_index(pins->iothreadpin, (guint)i);
        if (pins->iothread_ids->len == 0) {
            g_clear_pointer(&pins->iothread_ids, g_array_unref);
            g_clear_pointer(&pins->iothreadpin, g_ptr_array_unref);
        }
        return;
    }
    if (i >= 0) {
        sa_cpuset_free(g_ptr_array_index(pins->iothreadpin, i));
        g_ptr_array_index(pins->iothreadpin, i) = sa_cpuset_copy(set);
        return;
    }
    if (pins->iothread_ids == NULL) {
        pins->iothread_ids = g_array_new(FALSE, FALSE, sizeof(guint));
        pins->iothreadpin = new_set_array();
    }
    g_array_append_val(pins->iothread_ids, id);
    g_ptr_array_add(pins->iothreadpin, sa_cpuset_copy(set));
}

void sa_metadata_record_clear(SaMetadataRecord *rec)
{
    g_return_if_fail(rec != NULL);

    rec->created = false;
    g_clear_pointer(&rec->own, sa_own_pins_free);
}
