/* softaff — rewriting a domain XML's softaff element for this host (incoming migration,
 * restore): what names a partition of the source host is made valid here. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-metadata.h"

#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <string.h>

#include "sa-error.h"
#include "sa-xml-private.h"

#define WHAT "domain XML"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlBuffer, xmlBufferFree)

static bool is_plain_element(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && n->ns == NULL && strcmp((const char *)n->name, name) == 0;
}

static xmlNode *plain_child(xmlNode *parent, const char *name)
{
    for (xmlNode *c = parent->children; c != NULL; c = c->next)
        if (is_plain_element(c, name))
            return c;
    return NULL;
}

/* The one softaff element under <metadata> (NULL when there is none); more than one is an error,
 * as for sa_domain_xml_parse. */
static bool find_softaff_element(xmlNode *metadata, xmlNode **found, GError **error)
{
    guint count = 0;

    *found = NULL;
    for (xmlNode *c = metadata->children; c != NULL; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || c->ns == NULL ||
            g_strcmp0((const char *)c->ns->href, SA_METADATA_NS) != 0)
            continue;
        if (count++ == 0)
            *found = c;
    }
    if (count > 1) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "softaff metadata: %u elements in namespace " SA_METADATA_NS
                    " under <metadata> (allowed: one <" SA_METADATA_ELEMENT ">)",
                    count);
        *found = NULL;
        return false;
    }
    return true;
}

/* The whole document, without an XML declaration (libvirt's own XML has none), in UTF-8;
 * whitespace, comments and every other element are written back as they were read. */
static char *serialize(xmlDoc *doc, GError **error)
{
    g_autoptr(xmlBuffer) buf = xmlBufferCreate();
    if (buf == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, WHAT ": cannot allocate an output buffer");
        return NULL;
    }
    xmlSaveCtxtPtr save = xmlSaveToBuffer(buf, "UTF-8", XML_SAVE_NO_DECL);
    if (save == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, WHAT ": cannot create an XML writer");
        return NULL;
    }
    long rc = xmlSaveDoc(save, doc);
    if (xmlSaveClose(save) < 0 || rc < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, WHAT ": cannot write the rewritten document");
        return NULL;
    }
    return g_strndup((const char *)xmlBufferContent(buf), (gsize)xmlBufferLength(buf));
}

bool sa_domain_xml_rewrite_for_host(const char *xml, gsize len, const SaTopology *topo, char **out,
                                    GError **error)
{
    g_return_val_if_fail(topo != NULL, false);
    g_return_val_if_fail(out != NULL, false);
    g_return_val_if_fail(error == NULL || *error == NULL, false);

    *out = NULL;

    g_autoptr(xmlDoc) doc = sa_xml_read(xml, len, WHAT, error);
    if (doc == NULL)
        return false;

    xmlNode *root = xmlDocGetRootElement(doc);
    if (!is_plain_element(root, "domain")) {
        g_autofree char *q = sa_xml_quote((const char *)root->name);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": root element is <%s>%s (expected <domain>)", q,
                    root->ns != NULL ? " with a namespace" : "");
        return false;
    }

    xmlNode *metadata = plain_child(root, "metadata");
    xmlNode *element = NULL;
    if (metadata == NULL)
        return true;
    if (!find_softaff_element(metadata, &element, error))
        return false;
    if (element == NULL)
        return true;

    /* Only a valid element is rewritten: what an invalid one means is not known. */
    SaMetadata md;
    if (!sa_metadata_parse_node(element, &md, error))
        return false;

    xmlNode *name_node = plain_child(root, "name");
    xmlChar *raw_name = name_node != NULL ? xmlNodeGetContent(name_node) : NULL;
    g_autofree char *name = g_strstrip(g_strdup(raw_name != NULL ? (const char *)raw_name : ""));
    xmlFree(raw_name);
    g_autofree char *qname = sa_xml_quote(name[0] != '\0' ? name : "(no name)");
    bool changed = false;

    /* assigned is the home a daemon chose on the host the XML comes from: its ids mean
     * nothing here, and this host's daemon chooses again. */
    if (md.assigned >= 0) {
        if (xmlUnsetProp(element, (const xmlChar *)"assigned") != 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO,
                        WHAT ": cannot remove assigned=\"%d\" from the softaff element",
                        md.assigned);
            return false;
        }
        g_message("domain %s: dropped assigned=\"%d\" (the home chosen on the source host)", qname,
                  md.assigned);
        changed = true;
    }

    if (md.preferred >= 0 && sa_topology_find_partition(topo, (guint)md.preferred) < 0) {
        if (xmlSetProp(element, (const xmlChar *)"preferred", (const xmlChar *)"auto") == NULL) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO,
                        WHAT ": cannot set preferred=\"auto\" on the softaff element");
            return false;
        }
        g_autofree char *ids = sa_topology_format_ids(topo);
        g_message("domain %s: preferred=\"%d\" names no partition of this host (partitions of "
                  "layout %s: %s): using preferred=\"auto\"",
                  qname, md.preferred, sa_layout_to_string(topo->layout), ids);
        changed = true;
    }

    if (!changed)
        return true;

    char *text = serialize(doc, error);
    if (text == NULL)
        return false;
    *out = text;
    return true;
}
