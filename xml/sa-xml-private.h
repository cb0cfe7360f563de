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

/* Parses an element already known to be softaff's (in SA_METADATA_NS, or bare). */
bool sa_metadata_parse_node(const xmlNode *node, SaMetadata *out, GError **error);

G_END_DECLS
