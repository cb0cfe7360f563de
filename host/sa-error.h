/* softaff — error domain shared by every module. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SA_ERROR (sa_error_quark())
GQuark sa_error_quark(void);

typedef enum {
    SA_ERROR_PARSE,       /* text that is not what it should be (cpulist, number, XML, JSON) */
    SA_ERROR_RANGE,       /* a value outside what is allowed */
    SA_ERROR_NOT_FOUND,   /* a file, partition or domain that does not exist */
    SA_ERROR_IO,          /* a read or write failed */
    SA_ERROR_CONFIG,      /* a configuration file problem */
    SA_ERROR_UNSUPPORTED, /* the host cannot do what was asked */
    SA_ERROR_TRANSIENT,   /* try again next tick */
    SA_ERROR_GONE,        /* the VM or thread went away */
} SaErrorCode;

G_END_DECLS
