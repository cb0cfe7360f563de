/* softaff — the domain-metadata contract (namespace urn:softaff:domain:1, element "affinity")
 * and the parts of a libvirt domain XML softaff needs. libxml2 with safe options. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-cpuset.h"
#include "sa-policy.h"
#include "sa-topology.h"

G_BEGIN_DECLS

#define SA_METADATA_NS "urn:softaff:domain:1"
#define SA_METADATA_KEY "softaff"
#define SA_METADATA_ELEMENT "affinity"
/* Largest metadata or domain XML accepted. */
#define SA_XML_MAX_BYTES (4 * 1024 * 1024)

typedef struct {
    SaMode mode;   /* default soft */
    int preferred; /* partition id, -1 = auto (default) */
    int softness;  /* 0..100, -1 = not set (config default) */
    int assigned;  /* -1 = not set */
} SaMetadata;

void sa_metadata_init(SaMetadata *md);

/* Parses the element alone, as virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT) returns it.
 * The namespace is matched by URI, not by prefix; libvirt returns the element without its
 * namespace, so a bare <affinity> is accepted too, another namespace is an error. Errors name
 * the attribute, the bad value and what is allowed. */
bool sa_metadata_parse(const char *xml, gsize len, SaMetadata *out, GError **error);
/* Formats the element for virDomainSetMetadata (no namespace declaration: libvirt adds it),
 * e.g. <affinity mode="soft" preferred="auto" softness="50" assigned="1"/>. Unset attributes
 * are left out. */
char *sa_metadata_format(const SaMetadata *md);
/* Checks values against this host: preferred/assigned must name a partition of topo. */
bool sa_metadata_check_host(const SaMetadata *md, const SaTopology *topo, GError **error);

/* What softaff needs of a domain's XML. */
typedef struct {
    char *name;
    char *uuid;
    guint n_vcpus;          /* current vCPUs */
    guint64 memory_bytes;   /* <currentMemory>, else <memory> */
    SaCpuSet *vcpu_cpuset;  /* <vcpu cpuset='...'>, NULL when absent */
    GPtrArray *vcpupin;     /* SaCpuSet* per vCPU id from <cputune><vcpupin>, NULL entries
                               for vCPUs without one; NULL when there is no <vcpupin> */
    SaCpuSet *emulatorpin;  /* <cputune><emulatorpin cpuset>, NULL when absent */
    GArray *iothread_ids;   /* guint: the I/O thread ids, from <iothreadids>, else (and for
                               the rest of <iothreads>N) the lowest ids not taken, from 1 as
                               libvirt numbers them; NULL when the domain has no I/O thread */
    GPtrArray *iothreadpin; /* SaCpuSet* per entry of iothread_ids from <cputune><iothreadpin>
                               (NULL entries: not pinned); NULL exactly when iothread_ids is */
    bool has_metadata;      /* a softaff element was present */
    SaMetadata metadata;    /* valid only when has_metadata and metadata_error == NULL */
    GError *metadata_error; /* the softaff element was present but invalid */
} SaDomainXml;

void sa_domain_xml_free(SaDomainXml *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaDomainXml, sa_domain_xml_free)

/* Parses a full <domain> document (from virDomainGetXMLDesc or the hook's stdin). An invalid
 * softaff element does not fail the parse: it lands in metadata_error. */
SaDomainXml *sa_domain_xml_parse(const char *xml, gsize len, GError **error);

/* Rewrites a domain XML's softaff element for this host (the hook, at incoming migration and
 * restore): drops `assigned` (the home the source host's daemon chose) and turns a `preferred`
 * id topo lacks into "auto", with a g_message() per change. The rest of the document is written
 * back as read (without an XML declaration; attribute quotes may change). *out is the new
 * document, or NULL when nothing changes (no softaff element, nothing to rewrite). A document
 * that cannot be read, or an invalid softaff element, is an error (nothing is rewritten). */
bool sa_domain_xml_rewrite_for_host(const char *xml, gsize len, const SaTopology *topo, char **out,
                                    GError **error);

G_END_DECLS
