/* softaff — the domain-metadata element <affinity xmlns="urn:softaff:domain:1" .../>. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-metadata.h"

#include <libxml/tree.h>
#include <string.h>

#include "sa-error.h"
#include "sa-xml-private.h"

#define WHAT "softaff metadata"
#define ALLOWED_ATTRIBUTES "mode, preferred, softness, assigned"
#define SA_METADATA_ID_MAX G_MAXINT

void sa_metadata_init(SaMetadata *md)
{
    g_return_if_fail(md != NULL);

    md->mode = SA_MODE_SOFT;
    md->preferred = -1;
    md->softness = -1;
    md->assigned = -1;
}

static bool parse_mode(const char *value, SaMode *out, GError **error)
{
    static const SaMode modes[] = {SA_MODE_SOFT, SA_MODE_STRICT, SA_MODE_OFF};

    /* Exact, case-sensitive match against the names the policy module gives its modes. */
    for (gsize i = 0; i < G_N_ELEMENTS(modes); i++) {
        if (g_strcmp0(value, sa_mode_to_string(modes[i])) == 0) {
            *out = modes[i];
            return true;
        }
    }
    g_autofree char *q = sa_xml_quote(value);
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                WHAT ": mode=\"%s\" is not valid (allowed: %s, %s, %s)", q,
                sa_mode_to_string(SA_MODE_SOFT), sa_mode_to_string(SA_MODE_STRICT),
                sa_mode_to_string(SA_MODE_OFF));
    return false;
}

/* A number attribute: min..max; "auto" gives -1 when allow_auto. */
static bool parse_number_attr(const char *attr, const char *value, guint64 min, guint64 max,
                              bool allow_auto, int *out, GError **error)
{
    guint64 v = 0;

    if (allow_auto && g_strcmp0(value, "auto") == 0) {
        *out = -1;
        return true;
    }

    g_autofree char *q = sa_xml_quote(value);
    g_autofree char *allowed =
        allow_auto
            ? g_strdup_printf("auto or a partition id %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
                              min, max)
            : g_strdup_printf("%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, min, max);
    switch (sa_xml_parse_number(value, max, &v)) {
    case SA_XML_NUMBER_OK:
        if (v >= min) {
            *out = (int)v;
            return true;
        }
        break;
    case SA_XML_NUMBER_SYNTAX:
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": %s=\"%s\" is not a plain decimal number (allowed: %s; no sign, "
                         "spaces or leading zeros)",
                    attr, q, allowed);
        return false;
    case SA_XML_NUMBER_RANGE:
        break;
    }
    g_set_error(error, SA_ERROR, SA_ERROR_RANGE, WHAT ": %s=\"%s\" is out of range (allowed: %s)",
                attr, q, allowed);
    return false;
}

static char *attr_value(const xmlAttr *attr)
{
    xmlChar *raw = xmlNodeListGetString(attr->doc, attr->children, 1);
    char *value = g_strdup(raw != NULL ? (const char *)raw : "");
    xmlFree(raw);
    return value;
}

static bool is_blank(const xmlChar *text)
{
    for (const xmlChar *p = text; p != NULL && *p != '\0'; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    return true;
}

bool sa_metadata_parse_node(const xmlNode *node, SaMetadata *out, GError **error)
{
    SaMetadata md;

    sa_metadata_init(&md);

    if (g_strcmp0((const char *)node->name, SA_METADATA_ELEMENT) != 0) {
        g_autofree char *q = sa_xml_quote((const char *)node->name);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": element <%s> is not known (expected <%s>)", q, SA_METADATA_ELEMENT);
        return false;
    }

    for (const xmlAttr *a = node->properties; a != NULL; a = a->next) {
        const char *name = (const char *)a->name;
        g_autofree char *value = attr_value(a);

        if (a->ns != NULL) {
            g_autofree char *q = sa_xml_quote(name);
            g_autofree char *qns = sa_xml_quote((const char *)a->ns->href);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": attribute \"%s\" in namespace %s is not known (allowed, without "
                             "a prefix: " ALLOWED_ATTRIBUTES ")",
                        q, qns);
            return false;
        }
        if (strcmp(name, "mode") == 0) {
            if (!parse_mode(value, &md.mode, error))
                return false;
        } else if (strcmp(name, "preferred") == 0) {
            if (!parse_number_attr(name, value, 0, SA_METADATA_ID_MAX, true, &md.preferred, error))
                return false;
        } else if (strcmp(name, "softness") == 0) {
            if (!parse_number_attr(name, value, 0, 100, false, &md.softness, error))
                return false;
        } else if (strcmp(name, "assigned") == 0) {
            if (!parse_number_attr(name, value, 0, SA_METADATA_ID_MAX, false, &md.assigned, error))
                return false;
        } else {
            g_autofree char *q = sa_xml_quote(name);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": unknown attribute \"%s\" (allowed: " ALLOWED_ATTRIBUTES ")", q);
            return false;
        }
    }

    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) {
            g_autofree char *q = sa_xml_quote((const char *)c->name);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": unexpected element <%s> inside <%s> (allowed: nothing, the "
                             "element is empty)",
                        q, SA_METADATA_ELEMENT);
            return false;
        }
        if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) &&
            !is_blank(c->content)) {
            g_autofree char *q = sa_xml_quote((const char *)c->content);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": unexpected text \"%s\" inside <%s> (allowed: nothing, the "
                             "element is empty)",
                        q, SA_METADATA_ELEMENT);
            return false;
        }
    }

    *out = md;
    return true;
}

bool sa_metadata_parse(const char *xml, gsize len, SaMetadata *out, GError **error)
{
    g_return_val_if_fail(out != NULL, false);
    g_return_val_if_fail(error == NULL || *error == NULL, false);

    g_autoptr(xmlDoc) doc = sa_xml_read(xml, len, WHAT, error);
    if (doc == NULL)
        return false;

    /* virDomainGetMetadata(ELEMENT) strips the namespace it was asked for, and `virsh metadata
     * --set` takes the element bare: no namespace means ours. Inside a domain XML the element
     * carries SA_METADATA_NS (any prefix). Any other namespace is not ours. */
    const xmlNode *root = xmlDocGetRootElement(doc);
    const char *ns = root->ns != NULL ? (const char *)root->ns->href : NULL;
    if (ns != NULL && strcmp(ns, SA_METADATA_NS) != 0) {
        g_autofree char *qname = sa_xml_quote((const char *)root->name);
        g_autofree char *qns = sa_xml_quote(ns);
        g_set_error(
            error, SA_ERROR, SA_ERROR_PARSE,
            WHAT
            ": root element <%s> is in namespace %s (expected <%s> in namespace " SA_METADATA_NS
            " or without a namespace)",
            qname, qns, SA_METADATA_ELEMENT);
        return false;
    }
    return sa_metadata_parse_node(root, out, error);
}

char *sa_metadata_format(const SaMetadata *md)
{
    g_return_val_if_fail(md != NULL, NULL);

    GString *s = g_string_new("<" SA_METADATA_ELEMENT);
    g_string_append_printf(s, " mode=\"%s\"", sa_mode_to_string(md->mode));
    if (md->preferred >= 0)
        g_string_append_printf(s, " preferred=\"%d\"", md->preferred);
    else
        g_string_append(s, " preferred=\"auto\"");
    if (md->softness >= 0)
        g_string_append_printf(s, " softness=\"%d\"", md->softness);
    if (md->assigned >= 0)
        g_string_append_printf(s, " assigned=\"%d\"", md->assigned);
    g_string_append(s, "/>");
    return g_string_free(s, FALSE);
}

static bool check_id(const char *attr, int id, const SaTopology *topo, GError **error)
{
    if (id < 0 || sa_topology_find_partition(topo, (guint)id) >= 0)
        return true;

    g_autofree char *ids = sa_topology_format_ids(topo);
    g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                WHAT ": %s=\"%d\" names no partition of this host (partitions of layout %s: %s)",
                attr, id, sa_layout_to_string(topo->layout), ids);
    return false;
}

bool sa_metadata_check_host(const SaMetadata *md, const SaTopology *topo, GError **error)
{
    g_return_val_if_fail(md != NULL, false);
    g_return_val_if_fail(topo != NULL, false);

    return check_id("preferred", md->preferred, topo, error) &&
           check_id("assigned", md->assigned, topo, error);
}
