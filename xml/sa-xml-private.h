/* softaff — internals shared by the xml/ files: the one safe way to read XML, and the metadata
 * element parser working on a node. Not installed, not used outside xml/. */
#pragma once

#include <glib.h>
#include <libxml/tree.h>

#include "sa-metadata.h"

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlDoc, xmlFreeDoc)

/* Reads a document with safe options: at most SA_XML_MAX_BYTES, valid UTF-8 only, no network,
 * no DTD (a document type declaration, and so any entity declaration, is refused before it is
 * processed), no entity substitution, no XInclude. what ("softaff metadata", "domain XML")
 * starts every error message; libxml2's own message is kept. */
xmlDoc *sa_xml_read(const char *xml, gsize len, const char *what, GError **error);

typedef enum {
    SA_XML_NUMBER_OK,
    SA_XML_NUMBER_SYNTAX, /* not a plain decimal: empty, sign, space, leading zero, other chars */
    SA_XML_NUMBER_RANGE,  /* digits only, but greater than max */
} SaXmlNumber;

/* Strict unsigned decimal: "0" or [1-9][0-9]*, nothing else, at most max. */
SaXmlNumber sa_xml_parse_number(const char *text, guint64 max, guint64 *out);

/* text for an error message: escaped (control characters as \n, \t, ...), cut at 64 characters. */
char *sa_xml_quote(const char *text);

/* An attribute's text ("" when empty). */
char *sa_xml_attr_value(const xmlAttr *attr);
/* Whether text is empty or only XML whitespace. */
bool sa_xml_is_blank(const xmlChar *text);
/* Whether element n is softaff's by namespace: SA_METADATA_NS, or none (libvirt's bare form). */
bool sa_xml_is_ours(const xmlNode *n);

/* How a child node of a softaff element is taken: comments, processing instructions and blank
 * text are skipped; an element of ours is the caller's; text and other namespaces are errors. */
typedef enum {
    SA_XML_CHILD_SKIP,
    SA_XML_CHILD_ELEMENT,
    SA_XML_CHILD_BAD,
} SaXmlChild;

/* allowed says what parent may hold, for the error ("<own>, at most once"). */
SaXmlChild sa_xml_child_kind(const xmlNode *c, const char *parent, const char *allowed,
                             GError **error);
/* The error for an element c of ours that parent does not take. */
void sa_xml_unexpected_element(const xmlNode *c, const char *parent, const char *allowed,
                               GError **error);

/* libvirt's cpuset syntax: a cpulist where an entry "^N" removes CPU N again ("0-7,^3"); the
 * set may not be empty. what starts the error message, where names the attribute. */
SaCpuSet *sa_xml_parse_cpuset(const char *what, const char *where, const char *value,
                              GError **error);

/* Parses an element already known to be softaff's (in SA_METADATA_NS, or bare), with
 * softaffd's child: see sa_metadata_parse_full. */
bool sa_metadata_parse_node(const xmlNode *node, SaMetadata *out, SaMetadataRecord *rec,
                            guint *user_attrs, GError **error);

/* A plain decimal min..max; attr names it in the error ("<own> vcpus"). */
bool sa_metadata_parse_uint(const char *attr, const char *value, guint64 min, guint64 max,
                            guint64 *out, GError **error);

/* <softaffd>: its assigned (-1 when absent) and the record. */
bool sa_record_parse_node(const xmlNode *node, int *assigned, SaMetadataRecord *rec,
                          GError **error);
/* Appends <softaffd .../> for assigned (when >= 0) and rec (may be NULL); nothing when there
 * is nothing to write. */
void sa_record_format(GString *s, int assigned, const SaMetadataRecord *rec);

G_END_DECLS
