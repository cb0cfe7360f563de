/* softaff — policy vocabulary: modes, states, the configuration, per-VM state, softness.
 * The tick itself is in tick.c, the initial home choice in home.c. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-error.h"
#include "sa-policy.h"

#include <string.h>

static const char *const mode_names[] = {
    [SA_MODE_SOFT] = "soft",
    [SA_MODE_STRICT] = "strict",
    [SA_MODE_OFF] = "off",
};

const char *sa_mode_to_string(SaMode mode)
{
    if ((guint)mode < G_N_ELEMENTS(mode_names))
        return mode_names[mode];
    return "unknown";
}

bool sa_mode_from_string(const char *text, SaMode *out, GError **error)
{
    g_return_val_if_fail(out != NULL, false);
    for (guint i = 0; text && i < G_N_ELEMENTS(mode_names); i++) {
        if (strcmp(text, mode_names[i]) == 0) {
            *out = (SaMode)i;
            return true;
        }
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "mode '%s': expected soft, strict or off",
                text ? text : "");
    return false;
}

const char *sa_vm_state_to_string(SaVmState state)
{
    switch (state) {
    case SA_STATE_HOME:
        return "home";
    case SA_STATE_BURST:
        return "burst";
    case SA_STATE_DOOR:
        return "door";
    }
    return "unknown";
}

void sa_policy_config_init(SaPolicyConfig *cfg)
{
    g_return_if_fail(cfg != NULL);
    cfg->softness = 50;
    cfg->dwell_ms = 2000;
    cfg->smoothing = 0.5;
    cfg->max_holdoff_ms = 30000;
}

/* Piecewise linear: 0 < s <= 50 goes from 1.0 down to 0.85 (openEuler's 85% at the default),
 * 50 <= s <= 100 from 0.85 down to 0 (any wait bursts). */
double sa_policy_burst_threshold(guint softness)
{
    if (softness == 0)
        return 2.0;
    if (softness >= 100)
        return 0.0;
    if (softness <= 50)
        return 1.0 - 0.15 * softness / 50.0;
    return 0.85 * (100 - softness) / 50.0;
}

void sa_policy_vm_init(SaPolicyVm *vm)
{
    g_return_if_fail(vm != NULL);
    memset(vm, 0, sizeof *vm);
    vm->mode = SA_MODE_SOFT;
    vm->preferred = -1;
    vm->assigned = -1;
    vm->softness = -1;
    vm->st.home = -1;
    vm->st.state = SA_STATE_HOME;
    vm->st.visited = g_array_new(FALSE, FALSE, sizeof(guint));
    vm->st.last_change_ms = G_MININT64;
    vm->st.holdoff_until_ms = G_MININT64;
    vm->st.last_voluntary_ms = G_MININT64;
    vm->st.fits_since_ms = G_MININT64;
    vm->st.last_forced_ms = G_MININT64;
    vm->st.outgrow_since_ms = G_MININT64;
    vm->st.spike_ms = G_MININT64;
    vm->st.idle = g_array_new(FALSE, FALSE, sizeof(SaPartitionIdle));
}

void sa_policy_vm_clear(SaPolicyVm *vm)
{
    if (vm == NULL)
        return;
    g_clear_pointer(&vm->st.vcpus, sa_cpuset_free);
    g_clear_pointer(&vm->st.emulator, sa_cpuset_free);
    g_clear_pointer(&vm->st.visited, g_array_unref);
    g_clear_pointer(&vm->st.idle, g_array_unref);
}
