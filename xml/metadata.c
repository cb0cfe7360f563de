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

/* A plain decimal min..max; allowed_prefix goes before the range in the error ("auto or a
 * partition id "). attr names the attribute in the error ("softness", "<own> vcpus"). */
static bool parse_number(const char *attr, const char *value, guint64 min, guint64 max,
                         const char *allowed_prefix, guint64 *out, GError **error)
{
    guint64 v = 0;
    SaXmlNumber r = sa_xml_parse_number(value, max, &v);

    if (r == SA_XML_NUMBER_OK && v >= min) {
        *out = v;
        return true;
    }
    g_autofree char *q = sa_xml_quote(value);
    g_autofree char *allowed =
        g_strdup_printf("%s%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, allowed_prefix, min, max);
    if (r == SA_XML_NUMBER_SYNTAX)
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": %s=\"%s\" is not a plain decimal number (allowed: %s; no sign, "
                         "spaces or leading zeros)",
                    attr, q, allowed);
    else
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                    WHAT ": %s=\"%s\" is out of range (allowed: %s)", attr, q, allowed);
    return false;
}

bool sa_metadata_parse_uint(const char *attr, const char *value, guint64 min, guint64 max,
                            guint64 *out, GError **error)
{
    return parse_number(attr, value, min, max, "", out, error);
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
    if (!parse_number(attr, value, min, max, allow_auto ? "auto or a partition id " : "", &v,
                      error))
        return false;
    *out = (int)v;
    return true;
}

/* One user attribute (or the legacy assigned=) into md; *attrs gets its SaMetadataUserAttrs. */
static bool parse_attr(const xmlAttr *a, SaMetadata *md, guint *attrs, GError **error)
{
    const char *name = (const char *)a->name;
    g_autofree char *value = sa_xml_attr_value(a);

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
        *attrs |= SA_METADATA_HAS_MODE;
        return parse_mode(value, &md->mode, error);
    }
    if (strcmp(name, "preferred") == 0) {
        *attrs |= SA_METADATA_HAS_PREFERRED;
        return parse_number_attr(name, value, 0, SA_METADATA_ID_MAX, true, &md->preferred, error);
    }
    if (strcmp(name, "softness") == 0) {
        *attrs |= SA_METADATA_HAS_SOFTNESS;
        return parse_number_attr(name, value, 0, 100, false, &md->softness, error);
    }
    /* Written here by earlier versions; now in <softaffd>. */
    if (strcmp(name, "assigned") == 0)
        return parse_number_attr(name, value, 0, SA_METADATA_ID_MAX, false, &md->assigned, error);

    g_autofree char *q = sa_xml_quote(name);
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                WHAT ": unknown attribute \"%s\" (allowed: " ALLOWED_ATTRIBUTES ")", q);
    return false;
}

#define CHILDREN "<softaffd>, at most once"

/* The children: at most one <softaffd>; its assigned wins over the legacy attribute. */
static bool parse_children(const xmlNode *node, SaMetadata *md, SaMetadataRecord *rec,
                           GError **error)
{
    bool seen = false;

    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        SaXmlChild kind = sa_xml_child_kind(c, SA_METADATA_ELEMENT, CHILDREN, error);
        if (kind == SA_XML_CHILD_BAD)
            return false;
        if (kind == SA_XML_CHILD_SKIP)
            continue;
        if (seen || strcmp((const char *)c->name, "softaffd") != 0) {
            sa_xml_unexpected_element(c, SA_METADATA_ELEMENT, CHILDREN, error);
            return false;
        }
        int assigned = -1;
        if (!sa_record_parse_node(c, &assigned, rec, error))
            return false;
        if (assigned >= 0)
            md->assigned = assigned;
        seen = true;
    }
    return true;
}

bool sa_metadata_parse_node(const xmlNode *node, SaMetadata *out, SaMetadataRecord *rec,
                            guint *user_attrs, GError **error)
{
    SaMetadata md;
    SaMetadataRecord r = {0};
    guint attrs = 0;

    sa_metadata_init(&md);
    if (g_strcmp0((const char *)node->name, SA_METADATA_ELEMENT) != 0) {
        g_autofree char *q = sa_xml_quote((const char *)node->name);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": element <%s> is not known (expected <%s>)", q, SA_METADATA_ELEMENT);
        return false;
    }
    for (const xmlAttr *a = node->properties; a != NULL; a = a->next)
        if (!parse_attr(a, &md, &attrs, error))
            return false;
    if (!parse_children(node, &md, &r, error)) {
        /* A <softaffd> already read before a bad sibling. */
        sa_metadata_record_clear(&r);
        return false;
    }

    *out = md;
    if (rec != NULL)
        *rec = r;
    else
        sa_metadata_record_clear(&r);
    if (user_attrs != NULL)
        *user_attrs = attrs;
    return true;
}

bool sa_metadata_parse(const char *xml, gsize len, SaMetadata *out, GError **error)
{
    return sa_metadata_parse_full(xml, len, out, NULL, NULL, error);
}

bool sa_metadata_parse_full(const char *xml, gsize len, SaMetadata *out, SaMetadataRecord *rec,
                            guint *user_attrs, GError **error)
{
    if (rec != NULL)
        sa_metadata_record_clear(rec);
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
    return sa_metadata_parse_node(root, out, rec, user_attrs, error);
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

char *sa_metadata_format_full(const SaMetadata *md, guint user_attrs, const SaMetadataRecord *rec)
{
    g_return_val_if_fail(md != NULL, NULL);

    GString *s = g_string_new("<" SA_METADATA_ELEMENT);
    if (user_attrs & SA_METADATA_HAS_MODE)
        g_string_append_printf(s, " mode=\"%s\"", sa_mode_to_string(md->mode));
    if ((user_attrs & SA_METADATA_HAS_PREFERRED) && md->preferred >= 0)
        g_string_append_printf(s, " preferred=\"%d\"", md->preferred);
    else if (user_attrs & SA_METADATA_HAS_PREFERRED)
        g_string_append(s, " preferred=\"auto\"");
    if ((user_attrs & SA_METADATA_HAS_SOFTNESS) && md->softness >= 0)
        g_string_append_printf(s, " softness=\"%d\"", md->softness);
    gsize open_end = s->len;
    g_string_append(s, ">");
    sa_record_format(s, md->assigned, rec);
    if (s->len == open_end + 1) {
        g_string_truncate(s, open_end);
        g_string_append(s, "/>");
    } else {
        g_string_append(s, "</" SA_METADATA_ELEMENT ">");
    }
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
