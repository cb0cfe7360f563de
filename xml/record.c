/* softaff — softaffd's child of the metadata element: <softaffd assigned created><own .../>. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-metadata.h"

#include <libxml/tree.h>
#include <string.h>

#include "sa-error.h"
#include "sa-xml-private.h"

#define WHAT "softaff metadata"
#define EMPTY "nothing, the element is empty"
/* As many vCPUs as the domain reader takes. */
#define RECORD_MAX_VCPUS 16384

/* The values of node's attributes called names (NULL-terminated; values NULL when absent), as
 * read; an attribute of another name or with a namespace is an error. */
static bool read_attrs(const xmlNode *node, const char *const *names, char **values, GError **error)
{
    const char *element = (const char *)node->name;

    for (const xmlAttr *a = node->properties; a != NULL; a = a->next) {
        guint i = 0;
        while (names[i] != NULL && (a->ns != NULL || strcmp((const char *)a->name, names[i]) != 0))
            i++;
        if (names[i] != NULL && values[i] == NULL) {
            values[i] = sa_xml_attr_value(a);
            continue;
        }
        g_autofree char *allowed = g_strjoinv(", ", (char **)names);
        g_autofree char *q = sa_xml_quote((const char *)a->name);
        if (a->ns != NULL) {
            g_autofree char *qns = sa_xml_quote((const char *)a->ns->href);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": attribute \"%s\" in namespace %s on <%s> is not known (allowed, "
                             "without a prefix: %s)",
                        q, qns, element, allowed);
        } else {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        WHAT ": unknown attribute \"%s\" on <%s> (allowed: %s)", q, element,
                        allowed);
        }
        return false;
    }
    return true;
}

static void free_values(char **values, guint n)
{
    for (guint i = 0; i < n; i++)
        g_free(values[i]);
}

/* node holds nothing but comments and blanks. */
static bool check_empty(const xmlNode *node, GError **error)
{
    const char *name = (const char *)node->name;

    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        SaXmlChild kind = sa_xml_child_kind(c, name, EMPTY, error);
        if (kind == SA_XML_CHILD_ELEMENT)
            sa_xml_unexpected_element(c, name, EMPTY, error);
        if (kind != SA_XML_CHILD_SKIP)
            return false;
    }
    return true;
}

static bool missing(const xmlNode *node, const char *needs, GError **error)
{
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": <%s> needs %s", (const char *)node->name,
                needs);
    return false;
}

/* The id and the set of a pin whose attributes are read. */
static SaCpuSet *pin_values(const xmlNode *node, const char *id_attr, char **values, guint64 min,
                            guint64 max, guint64 *id, GError **error)
{
    const char *element = (const char *)node->name;

    if (values[0] == NULL || values[1] == NULL) {
        g_autofree char *needs = g_strdup_printf("both %s and cpuset attributes", id_attr);
        missing(node, needs, error);
        return NULL;
    }
    g_autofree char *label = g_strdup_printf("<%s> %s", element, id_attr);
    if (!sa_metadata_parse_uint(label, values[0], min, max, id, error))
        return NULL;
    g_autofree char *where =
        g_strdup_printf("<%s %s=\"%" G_GUINT64_FORMAT "\"> cpuset", element, id_attr, *id);
    return sa_xml_parse_cpuset(WHAT, where, values[1], error);
}

/* <vcpupin vcpu cpuset/> (below n_vcpus), <iothreadpin iothread cpuset/> (from 1): the id and
 * the set. */
static SaCpuSet *parse_pin(const xmlNode *node, const char *id_attr, guint64 min, guint64 max,
                           guint64 *id, GError **error)
{
    const char *const names[] = {id_attr, "cpuset", NULL};
    char *values[2] = {NULL, NULL};
    SaCpuSet *set = NULL;

    if (read_attrs(node, names, values, error) && check_empty(node, error))
        set = pin_values(node, id_attr, values, min, max, id, error);
    free_values(values, 2);
    return set;
}

static bool parse_vcpupin(const xmlNode *node, SaOwnPins *own, GError **error)
{
    guint64 vcpu = 0;
    g_autoptr(SaCpuSet) set = parse_pin(node, "vcpu", 0, own->n_vcpus - 1, &vcpu, error);

    if (set == NULL)
        return false;
    if (own->vcpupin != NULL && vcpu < own->vcpupin->len &&
        g_ptr_array_index(own->vcpupin, vcpu) != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": more than one <vcpupin> for vcpu %u in <own>", (guint)vcpu);
        return false;
    }
    sa_own_pins_set_vcpu(own, (guint)vcpu, set);
    return true;
}

static bool parse_iothreadpin(const xmlNode *node, SaOwnPins *own, GError **error)
{
    guint64 id = 0;
    g_autoptr(SaCpuSet) set = parse_pin(node, "iothread", 1, G_MAXUINT, &id, error);

    if (set == NULL)
        return false;
    if (sa_own_pins_iothread(own, (guint)id) != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": more than one <iothreadpin> for iothread %u in <own>", (guint)id);
        return false;
    }
    sa_own_pins_set_iothread(own, (guint)id, set);
    return true;
}

static bool parse_emulatorpin(const xmlNode *node, SaOwnPins *own, GError **error)
{
    const char *const names[] = {"cpuset", NULL};
    g_autofree char *cpuset = NULL;

    if (own->emulatorpin != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": more than one <emulatorpin> in <own>");
        return false;
    }
    if (!read_attrs(node, names, &cpuset, error) || !check_empty(node, error))
        return false;
    if (cpuset == NULL)
        return missing(node, "a cpuset attribute", error);
    own->emulatorpin = sa_xml_parse_cpuset(WHAT, "<emulatorpin> cpuset", cpuset, error);
    return own->emulatorpin != NULL;
}

#define OWN_CHILDREN "<vcpupin>, <emulatorpin>, <iothreadpin>"

static bool parse_own_children(const xmlNode *node, SaOwnPins *own, GError **error)
{
    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        SaXmlChild kind = sa_xml_child_kind(c, "own", OWN_CHILDREN, error);
        if (kind == SA_XML_CHILD_BAD)
            return false;
        if (kind == SA_XML_CHILD_SKIP)
            continue;
        const char *name = (const char *)c->name;
        bool ok;
        if (strcmp(name, "vcpupin") == 0)
            ok = parse_vcpupin(c, own, error);
        else if (strcmp(name, "emulatorpin") == 0)
            ok = parse_emulatorpin(c, own, error);
        else if (strcmp(name, "iothreadpin") == 0)
            ok = parse_iothreadpin(c, own, error);
        else
            ok = (sa_xml_unexpected_element(c, "own", OWN_CHILDREN, error), false);
        if (!ok)
            return false;
    }
    return true;
}

static SaOwnPins *parse_own(const xmlNode *node, GError **error)
{
    const char *const names[] = {"vcpus", "cpuset", NULL};
    char *values[2] = {NULL, NULL};
    g_autoptr(SaOwnPins) own = sa_own_pins_new();
    guint64 n = 0;
    bool ok = read_attrs(node, names, values, error);

    if (ok && values[0] == NULL)
        ok = missing(node, "a vcpus attribute (the number of vCPUs)", error);
    if (ok)
        ok = sa_metadata_parse_uint("<own> vcpus", values[0], 1, RECORD_MAX_VCPUS, &n, error);
    own->n_vcpus = (guint)n;
    if (ok && values[1] != NULL) {
        own->vcpu_cpuset = sa_xml_parse_cpuset(WHAT, "<own> cpuset", values[1], error);
        ok = own->vcpu_cpuset != NULL;
    }
    free_values(values, 2);
    if (!ok || !parse_own_children(node, own, error))
        return NULL;
    return g_steal_pointer(&own);
}

static bool parse_softaffd_attrs(const xmlNode *node, int *assigned, bool *created, GError **error)
{
    const char *const names[] = {"assigned", "created", NULL};
    char *values[2] = {NULL, NULL};
    guint64 id = 0;
    bool ok = read_attrs(node, names, values, error);

    if (ok && values[0] != NULL) {
        ok = sa_metadata_parse_uint("<softaffd> assigned", values[0], 0, G_MAXINT, &id, error);
        *assigned = (int)id;
    }
    if (ok && values[1] != NULL && strcmp(values[1], "yes") != 0) {
        g_autofree char *q = sa_xml_quote(values[1]);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": <softaffd> created=\"%s\" is not valid (allowed: yes; left out: no)",
                    q);
        ok = false;
    }
    *created = values[1] != NULL;
    free_values(values, 2);
    return ok;
}

bool sa_record_parse_node(const xmlNode *node, int *assigned, SaMetadataRecord *rec, GError **error)
{
    SaMetadataRecord r = {0};
    int a = -1;

    if (!parse_softaffd_attrs(node, &a, &r.created, error))
        return false;
    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        SaXmlChild kind = sa_xml_child_kind(c, "softaffd", "<own>, at most once", error);
        bool ok = false;

        if (kind == SA_XML_CHILD_SKIP)
            continue;
        if (kind == SA_XML_CHILD_ELEMENT && strcmp((const char *)c->name, "own") == 0 &&
            r.own == NULL)
            ok = (r.own = parse_own(c, error)) != NULL;
        else if (kind == SA_XML_CHILD_ELEMENT)
            sa_xml_unexpected_element(c, "softaffd", "<own>, at most once", error);
        if (!ok) {
            sa_metadata_record_clear(&r);
            return false;
        }
    }
    *assigned = a;
    *rec = r;
    return true;
}

static void format_set(GString *s, const char *attr, const SaCpuSet *set)
{
    g_autofree char *text = sa_cpuset_format(set);
    g_string_append_printf(s, " %s=\"%s\"", attr, text);
}

/* The pins inside <own>, vCPUs in order, I/O threads as listed. */
static void format_own_pins(GString *s, const SaOwnPins *own)
{
    for (guint v = 0; own->vcpupin != NULL && v < own->vcpupin->len; v++) {
        const SaCpuSet *set = g_ptr_array_index(own->vcpupin, v);
        if (set == NULL)
            continue;
        g_string_append_printf(s, "<vcpupin vcpu=\"%u\"", v);
        format_set(s, "cpuset", set);
        g_string_append(s, "/>");
    }
    if (own->emulatorpin != NULL) {
        g_string_append(s, "<emulatorpin");
        format_set(s, "cpuset", own->emulatorpin);
        g_string_append(s, "/>");
    }
    for (guint i = 0; own->iothread_ids != NULL && i < own->iothread_ids->len; i++) {
        g_string_append_printf(s, "<iothreadpin iothread=\"%u\"",
                               g_array_index(own->iothread_ids, guint, i));
        format_set(s, "cpuset", g_ptr_array_index(own->iothreadpin, i));
        g_string_append(s, "/>");
    }
}

static void format_own(GString *s, const SaOwnPins *own)
{
    g_string_append_printf(s, "<own vcpus=\"%u\"", own->n_vcpus);
    if (own->vcpu_cpuset != NULL)
        format_set(s, "cpuset", own->vcpu_cpuset);
    gsize closed = s->len;
    g_string_append(s, ">");
    format_own_pins(s, own);
    if (s->len == closed + 1)
        g_string_truncate(s, closed);
    g_string_append(s, s->len == closed ? "/>" : "</own>");
}

void sa_record_format(GString *s, int assigned, const SaMetadataRecord *rec)
{
    bool created = rec != NULL && rec->created;
    const SaOwnPins *own = rec != NULL ? rec->own : NULL;

    if (assigned < 0 && !created && own == NULL)
        return;
    g_string_append(s, "<softaffd");
    if (assigned >= 0)
        g_string_append_printf(s, " assigned=\"%d\"", assigned);
    if (created)
        g_string_append(s, " created=\"yes\"");
    if (own == NULL) {
        g_string_append(s, "/>");
        return;
    }
    g_string_append(s, ">");
    format_own(s, own);
    g_string_append(s, "</softaffd>");
}
