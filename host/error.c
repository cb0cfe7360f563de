/* softaff — the SA_ERROR domain. */
#define G_LOG_DOMAIN "softaff-error"

#include "sa-error.h"

G_DEFINE_QUARK(softaff - error - quark, sa_error)
