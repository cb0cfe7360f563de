/* softaff — policy internals shared by the files of policies/ (not an interface). */
#pragma once

#include "sa-policy.h"

G_BEGIN_DECLS

/* sa_policy_choose_home(), with the memory already promised to VMs homed earlier in the same
 * tick: claimed_bytes is indexed like topo->nodes (NULL = none). */
bool sa_policy_choose_home_claimed(const SaTopology *topo, const guint *committed_vcpus,
                                   const guint64 *claimed_bytes, const SaCpuSet *allowed,
                                   guint n_vcpus, guint64 memory_bytes, SaAdvice *out,
                                   GError **error);

G_END_DECLS
