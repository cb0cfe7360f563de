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
/* Nova's metadata namespaces: ".../nova/1.1" today; other versions are read the same way. */
#define SA_NOVA_NS_PREFIX "http://openstack.org/xmlns/libvirt/nova/"
/* Largest metadata or domain XML accepted. */
#define SA_XML_MAX_BYTES (4 * 1024 * 1024)

typedef struct {
    SaMode mode;   /* default soft */
    int preferred; /* partition id, -1 = auto (default) */
    int softness;  /* 0..100, -1 = not set (config default) */
    int assigned;  /* -1 = not set */
} SaMetadata;

void sa_metadata_init(SaMetadata *md);

/* A VM's own thread settings (its <vcpu cpuset>, <vcpupin>, <emulatorpin>, <iothreadpin>), as
 * softaffd recorded them before it first pinned the VM. */
typedef struct {
    guint n_vcpus;          /* vCPUs when recorded (vcpupin may be shorter: unpinned tail) */
    SaCpuSet *vcpu_cpuset;  /* NULL: none */
    GPtrArray *vcpupin;     /* SaCpuSet* per vCPU id (NULL entries: not pinned); NULL: none */
    SaCpuSet *emulatorpin;  /* NULL: none */
    GArray *iothread_ids;   /* guint: the I/O threads that have a pin; NULL: none */
    GPtrArray *iothreadpin; /* SaCpuSet* per entry of iothread_ids (never NULL entries) */
} SaOwnPins;

SaOwnPins *sa_own_pins_new(void);
SaOwnPins *sa_own_pins_copy(const SaOwnPins *pins);
void sa_own_pins_free(SaOwnPins *pins);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaOwnPins, sa_own_pins_free)
/* By meaning: a missing vcpupin tail is no pin; the order of I/O thread pins does not count. */
bool sa_own_pins_equal(const SaOwnPins *a, const SaOwnPins *b);
/* The pin of I/O thread id, or NULL. */
const SaCpuSet *sa_own_pins_iothread(const SaOwnPins *pins, guint id);
/* Sets (copies) or, with set NULL, removes vCPU vcpu's / I/O thread id's pin (the element is
 * valid with vcpu below n_vcpus, id from 1). Removing keeps one form per meaning: no NULL
 * tail in vcpupin, NULL arrays when no pin is left. */
void sa_own_pins_set_vcpu(SaOwnPins *pins, guint vcpu, const SaCpuSet *set);
void sa_own_pins_set_iothread(SaOwnPins *pins, guint id, const SaCpuSet *set);

/* What softaffd writes into the element, as a child <softaffd> apart from the user's attributes
 * (docs/metadata.md):
 *   <affinity mode="soft" preferred="auto">
 *     <softaffd assigned="1" created="yes">
 *       <own vcpus="2" cpuset="0-7">
 *         <vcpupin vcpu="0" cpuset="1"/> <emulatorpin cpuset="0-1"/>
 *         <iothreadpin iothread="1" cpuset="0"/>
 *       </own>
 *     </softaffd>
 *   </affinity>
 * created="yes": softaffd made the element for a VM that had no softaff metadata; such an
 * element with no user attribute is not "the user's settings" (manage=explicit ignores it, the
 * "pinned by the user, no metadata" rule still applies). */
typedef struct {
    bool created;   /* the element exists only because softaffd wrote it */
    SaOwnPins *own; /* the VM's own settings; NULL: not recorded */
} SaMetadataRecord;

void sa_metadata_record_clear(SaMetadataRecord *rec);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SaMetadataRecord, sa_metadata_record_clear)

/* Whether the element holds any user attribute (mode, preferred, softness). */
typedef enum {
    SA_METADATA_HAS_MODE = 1 << 0,
    SA_METADATA_HAS_PREFERRED = 1 << 1,
    SA_METADATA_HAS_SOFTNESS = 1 << 2,
} SaMetadataUserAttrs;

/* Parses the element alone, as virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT) returns it.
 * The namespace is matched by URI, not by prefix; libvirt returns the element without its
 * namespace, so a bare <affinity> is accepted too, another namespace is an error. Errors name
 * the attribute, the bad value and what is allowed. */
bool sa_metadata_parse(const char *xml, gsize len, SaMetadata *out, GError **error);
/* The same, with softaffd's child: rec gets it (cleared first; may be NULL), *user_attrs the
 * SaMetadataUserAttrs present (may be NULL). assigned comes from <softaffd assigned>, or from
 * the attribute assigned= that earlier versions wrote. */
bool sa_metadata_parse_full(const char *xml, gsize len, SaMetadata *out, SaMetadataRecord *rec,
                            guint *user_attrs, GError **error);
/* Formats the element for virDomainSetMetadata (no namespace declaration: libvirt adds it),
 * e.g. <affinity mode="soft" preferred="auto" softness="50" assigned="1"/>. Unset attributes
 * are left out. assigned goes in the legacy attribute, which parse still reads; a writer that
 * knows the record uses sa_metadata_format_full. */
char *sa_metadata_format(const SaMetadata *md);
/* The element with softaffd's child: the user attributes named by user_attrs (none when 0),
 * then <softaffd> with md->assigned (when >= 0), rec->created and rec->own (rec may be NULL:
 * no child unless assigned is set). Parses back with sa_metadata_parse_full to the same. */
char *sa_metadata_format_full(const SaMetadata *md, guint user_attrs, const SaMetadataRecord *rec);
/* Checks values against this host: preferred/assigned must name a partition of topo. */
bool sa_metadata_check_host(const SaMetadata *md, const SaTopology *topo, GError **error);

/* What softaff needs of a domain's XML. */
typedef struct {
    char *name;
    char *uuid;
    guint n_vcpus;           /* current vCPUs */
    guint64 memory_bytes;    /* <currentMemory>, else <memory> */
    SaCpuSet *vcpu_cpuset;   /* <vcpu cpuset='...'>, NULL when absent */
    GPtrArray *vcpupin;      /* SaCpuSet* per vCPU id from <cputune><vcpupin>, NULL entries
                                for vCPUs without one; NULL when there is no <vcpupin> */
    SaCpuSet *emulatorpin;   /* <cputune><emulatorpin cpuset>, NULL when absent */
    GArray *iothread_ids;    /* guint: the I/O thread ids, from <iothreadids>, else (and for
                                the rest of <iothreads>N) the lowest ids not taken, from 1 as
                                libvirt numbers them; NULL when the domain has no I/O thread */
    GPtrArray *iothreadpin;  /* SaCpuSet* per entry of iothread_ids from <cputune><iothreadpin>
                                (NULL entries: not pinned); NULL exactly when iothread_ids is */
    bool has_metadata;       /* a softaff element with the user's settings was present: not one
                                softaffd created that holds no user attribute */
    bool has_element;        /* a softaff element was present (the user's or softaffd's) */
    guint metadata_attrs;    /* SaMetadataUserAttrs of the element */
    SaMetadata metadata;     /* valid only when has_element and metadata_error == NULL */
    SaMetadataRecord record; /* softaffd's child of the element (own NULL: none) */
    GError *metadata_error;  /* the softaff element was present but invalid */
    /* What a [rule NAME] can match (NULL: absent or empty): <title> and <description> (text,
     * trimmed), and the OpenStack Nova flavor: <nova:flavor name> in <metadata><nova:instance>,
     * the namespace matched by URI (any version under SA_NOVA_NS_PREFIX), not by prefix. */
    char *title;
    char *description;
    char *nova_flavor;
    /* A <numatune> element is present: the user placed the guest's memory, softaff's mover
     * leaves it alone. */
    bool has_numatune;
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
/* Also, when the element holds softaffd's record of the VM's own settings: <vcpu cpuset>,
 * <cputune>'s <vcpupin>, <emulatorpin> and <iothreadpin> become exactly the recorded ones (every
 * pin softaff set is dropped), and the record goes; an element softaffd created with no user
 * attribute goes entirely. */
bool sa_domain_xml_rewrite_for_host(const char *xml, gsize len, const SaTopology *topo, char **out,
                                    GError **error);

G_END_DECLS
