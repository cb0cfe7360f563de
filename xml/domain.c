/* softaff — the parts of a libvirt domain XML softaff needs. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-metadata.h"

#include <libxml/tree.h>
#include <string.h>

#include "sa-error.h"
#include "sa-xml-private.h"

#define WHAT "domain XML"
/* More vCPUs than libvirt or any hypervisor supports is a broken document. */
#define SA_DOMAIN_MAX_VCPUS 16384
/* So are more I/O threads than that. */
#define SA_DOMAIN_MAX_IOTHREADS 16384

void sa_domain_xml_free(SaDomainXml *d)
{
    if (d == NULL)
        return;
    g_free(d->name);
    g_free(d->uuid);
    g_clear_pointer(&d->vcpu_cpuset, sa_cpuset_free);
    g_clear_pointer(&d->vcpupin, g_ptr_array_unref);
    g_clear_pointer(&d->emulatorpin, sa_cpuset_free);
    g_clear_pointer(&d->iothread_ids, g_array_unref);
    g_clear_pointer(&d->iothreadpin, g_ptr_array_unref);
    sa_metadata_record_clear(&d->record);
    g_clear_error(&d->metadata_error);
    g_free(d->title);
    g_free(d->description);
    g_free(d->nova_flavor);
    g_free(d);
}

static bool is_element(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && n->ns == NULL && strcmp((const char *)n->name, name) == 0;
}

/* The first child element without namespace called name, or NULL. */
static const xmlNode *child(const xmlNode *parent, const char *name)
{
    for (const xmlNode *c = parent->children; c != NULL; c = c->next)
        if (is_element(c, name))
            return c;
    return NULL;
}

static char *prop(const xmlNode *n, const char *name)
{
    xmlChar *raw = xmlGetNoNsProp(n, (const xmlChar *)name);
    if (raw == NULL)
        return NULL;
    char *value = g_strdup((const char *)raw);
    xmlFree(raw);
    return value;
}

/* Element text with surrounding whitespace removed. */
static char *text(const xmlNode *n)
{
    xmlChar *raw = xmlNodeGetContent(n);
    char *value = g_strstrip(g_strdup(raw != NULL ? (const char *)raw : ""));
    xmlFree(raw);
    return value;
}

static bool parse_uint(const char *where, const char *value, guint64 min, guint64 max, guint64 *out,
                       GError **error)
{
    guint64 v = 0;
    SaXmlNumber r = sa_xml_parse_number(value, max, &v);

    if (r == SA_XML_NUMBER_OK && v >= min) {
        *out = v;
        return true;
    }
    g_autofree char *q = sa_xml_quote(value);
    g_set_error(error, SA_ERROR, r == SA_XML_NUMBER_SYNTAX ? SA_ERROR_PARSE : SA_ERROR_RANGE,
                WHAT ": %s \"%s\" is %s (allowed: %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT ")",
                where, q, r == SA_XML_NUMBER_SYNTAX ? "not a plain decimal number" : "out of range",
                min, max);
    return false;
}

static SaCpuSet *parse_cpuset(const char *where, const char *value, GError **error)
{
    return sa_xml_parse_cpuset(WHAT, where, value, error);
}

/* libvirt's scaled integers: <memory unit='MiB'>512</memory>; KiB when there is no unit. */
static bool unit_scale(const char *unit, guint64 *scale)
{
    static const char prefixes[] = "kmgtpe";
    const char *p;

    if (unit == NULL || unit[0] == '\0') {
        *scale = 1024;
        return true;
    }
    if (g_ascii_strcasecmp(unit, "b") == 0 || g_ascii_strcasecmp(unit, "byte") == 0 ||
        g_ascii_strcasecmp(unit, "bytes") == 0) {
        *scale = 1;
        return true;
    }
    p = strchr(prefixes, g_ascii_tolower(unit[0]));
    if (p == NULL || unit[0] == '\0')
        return false;

    guint power = (guint)(p - prefixes) + 1;
    guint64 base;
    if (unit[1] == '\0' || g_ascii_strcasecmp(unit + 1, "iB") == 0)
        base = 1024;
    else if (g_ascii_strcasecmp(unit + 1, "B") == 0)
        base = 1000;
    else
        return false;

    *scale = 1;
    for (guint i = 0; i < power; i++)
        *scale *= base;
    return true;
}

static bool parse_memory(const xmlNode *n, guint64 *bytes, GError **error)
{
    g_autofree char *unit = prop(n, "unit");
    g_autofree char *value = text(n);
    g_autofree char *where = g_strdup_printf("<%s>", (const char *)n->name);
    guint64 scale = 0;
    guint64 amount = 0;

    if (!unit_scale(unit, &scale)) {
        g_autofree char *q = sa_xml_quote(unit);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": %s unit \"%s\" is not known (allowed: b, bytes, KB, k, KiB, MB, M, "
                         "MiB, GB, G, GiB, TB, T, TiB, PB, P, PiB, EB, E, EiB)",
                    where, q);
        return false;
    }
    if (!parse_uint(where, value, 0, G_MAXUINT64, &amount, error))
        return false;
    if (amount > G_MAXUINT64 / scale) {
        g_autofree char *q = sa_xml_quote(value);
        g_autofree char *qu = sa_xml_quote(unit);
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                    WHAT ": %s \"%s\" %s is out of range (more than 2^64 bytes)", where, q,
                    qu[0] != '\0' ? qu : "KiB");
        return false;
    }
    *bytes = amount * scale;
    return true;
}

static bool parse_vcpu(const xmlNode *vcpu, SaDomainXml *d, GError **error)
{
    g_autofree char *max_text = text(vcpu);
    g_autofree char *current = prop(vcpu, "current");
    g_autofree char *cpuset = prop(vcpu, "cpuset");
    guint64 max = 0;
    guint64 n = 0;

    if (!parse_uint("<vcpu>", max_text, 1, SA_DOMAIN_MAX_VCPUS, &max, error))
        return false;
    n = max;
    if (current != NULL) {
        if (!parse_uint("<vcpu current>", current, 1, SA_DOMAIN_MAX_VCPUS, &n, error))
            return false;
        if (n > max) {
            g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                        WHAT
                        ": <vcpu current> \"%s\" is more than the maximum of %" G_GUINT64_FORMAT
                        " vCPUs",
                        current, max);
            return false;
        }
    }
    d->n_vcpus = (guint)n;

    if (cpuset != NULL) {
        d->vcpu_cpuset = parse_cpuset("<vcpu cpuset>", cpuset, error);
        if (d->vcpu_cpuset == NULL)
            return false;
    }
    return true;
}

/* <vcpupin vcpu='N' cpuset=...> and <iothreadpin iothread='N' cpuset=...>: N (attr, in
 * min..max) and the set. */
static SaCpuSet *parse_pin(const xmlNode *c, const char *attr, guint64 min, guint64 max,
                           guint64 *id, GError **error)
{
    const char *element = (const char *)c->name;
    g_autofree char *number = prop(c, attr);
    g_autofree char *cpuset = prop(c, "cpuset");

    if (number == NULL || cpuset == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": <%s> needs both %s and cpuset attributes", element, attr);
        return NULL;
    }
    g_autofree char *what = g_strdup_printf("<%s %s>", element, attr);
    if (!parse_uint(what, number, min, max, id, error))
        return NULL;
    g_autofree char *where = g_strdup_printf("<%s %s='%u' cpuset>", element, attr, (guint)*id);
    return parse_cpuset(where, cpuset, error);
}

static bool parse_vcpupin(const xmlNode *c, SaDomainXml *d, GError **error)
{
    guint64 id = 0;
    SaCpuSet *set = parse_pin(c, "vcpu", 0, SA_DOMAIN_MAX_VCPUS - 1, &id, error);
    if (set == NULL)
        return false;

    if (d->vcpupin == NULL)
        d->vcpupin = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    if (d->vcpupin->len <= id)
        g_ptr_array_set_size(d->vcpupin, (gint)id + 1);
    if (g_ptr_array_index(d->vcpupin, id) != NULL) {
        sa_cpuset_free(set);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": more than one <vcpupin> for vcpu %u",
                    (guint)id);
        return false;
    }
    g_ptr_array_index(d->vcpupin, id) = set;
    return true;
}

static bool parse_emulatorpin(const xmlNode *c, SaDomainXml *d, GError **error)
{
    g_autofree char *cpuset = prop(c, "cpuset");

    if (d->emulatorpin != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": more than one <emulatorpin>");
        return false;
    }
    if (cpuset == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": <emulatorpin> needs a cpuset attribute");
        return false;
    }
    d->emulatorpin = parse_cpuset("<emulatorpin cpuset>", cpuset, error);
    return d->emulatorpin != NULL;
}

/* A pin for an I/O thread the domain does not have is left out: libvirt refuses such a
 * definition, and a reader of the hook's input must not fail on it. */
static bool parse_iothreadpin(const xmlNode *c, SaDomainXml *d, GHashTable *positions,
                              GError **error)
{
    guint64 id = 0;
    g_autoptr(SaCpuSet) set = parse_pin(c, "iothread", 1, G_MAXUINT, &id, error);
    if (set == NULL)
        return false;

    /* positions: I/O thread id -> its position in d->iothread_ids + 1 */
    guint pos = GPOINTER_TO_UINT(g_hash_table_lookup(positions, GUINT_TO_POINTER((guint)id)));
    if (pos == 0)
        return true;
    if (g_ptr_array_index(d->iothreadpin, pos - 1) != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": more than one <iothreadpin> for iothread %u", (guint)id);
        return false;
    }
    g_ptr_array_index(d->iothreadpin, pos - 1) = g_steal_pointer(&set);
    return true;
}

static bool parse_cputune(const xmlNode *cputune, SaDomainXml *d, GError **error)
{
    g_autoptr(GHashTable) positions = g_hash_table_new(NULL, NULL);

    for (guint i = 0; d->iothread_ids != NULL && i < d->iothread_ids->len; i++)
        g_hash_table_insert(positions, GUINT_TO_POINTER(g_array_index(d->iothread_ids, guint, i)),
                            GUINT_TO_POINTER(i + 1));
    for (const xmlNode *c = cputune->children; c != NULL; c = c->next) {
        if (is_element(c, "vcpupin") && !parse_vcpupin(c, d, error))
            return false;
        if (is_element(c, "emulatorpin") && !parse_emulatorpin(c, d, error))
            return false;
        if (is_element(c, "iothreadpin") && !parse_iothreadpin(c, d, positions, error))
            return false;
    }
    return true;
}

static bool add_iothread_id(SaDomainXml *d, GHashTable *taken, guint id, GError **error)
{
    if (!g_hash_table_add(taken, GUINT_TO_POINTER(id))) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": more than one <iothread> with id %u",
                    id);
        return false;
    }
    if (d->iothread_ids->len >= SA_DOMAIN_MAX_IOTHREADS) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, WHAT ": more than %d I/O threads",
                    SA_DOMAIN_MAX_IOTHREADS);
        return false;
    }
    g_array_append_val(d->iothread_ids, id);
    return true;
}

/* <iothreads>N</iothreads> and <iothreadids><iothread id/>: the ids listed, then (when N is
 * larger) the lowest ids not taken, from 1, as libvirt numbers them. */
static bool parse_iothreads(const xmlNode *root, SaDomainXml *d, GError **error)
{
    const xmlNode *n = child(root, "iothreads");
    const xmlNode *ids = child(root, "iothreadids");
    guint64 count = 0;

    if (n != NULL) {
        g_autofree char *value = text(n);
        if (!parse_uint("<iothreads>", value, 0, SA_DOMAIN_MAX_IOTHREADS, &count, error))
            return false;
    }
    g_autoptr(GHashTable) taken = g_hash_table_new(NULL, NULL);
    d->iothread_ids = g_array_new(FALSE, FALSE, sizeof(guint));
    for (const xmlNode *c = ids != NULL ? ids->children : NULL; c != NULL; c = c->next) {
        if (!is_element(c, "iothread"))
            continue;
        g_autofree char *id = prop(c, "id");
        guint64 v = 0;
        if (id == NULL) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": <iothread> needs an id attribute");
            return false;
        }
        if (!parse_uint("<iothread id>", id, 1, G_MAXUINT, &v, error) ||
            !add_iothread_id(d, taken, (guint)v, error))
            return false;
    }
    for (guint id = 1; d->iothread_ids->len < count; id++)
        if (!g_hash_table_contains(taken, GUINT_TO_POINTER(id)) &&
            !add_iothread_id(d, taken, id, error))
            return false;
    if (d->iothread_ids->len == 0) {
        g_clear_pointer(&d->iothread_ids, g_array_unref);
        return true;
    }
    d->iothreadpin = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_set_size(d->iothreadpin, (gint)d->iothread_ids->len);
    return true;
}

/* The softaff element: any element of SA_METADATA_NS directly under <metadata> (libvirt keeps
 * one element per namespace). Problems land in d->metadata_error, never fail the parse. */
static void parse_metadata(const xmlNode *metadata, SaDomainXml *d)
{
    const xmlNode *found = NULL;
    guint count = 0;

    for (const xmlNode *c = metadata->children; c != NULL; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || c->ns == NULL ||
            g_strcmp0((const char *)c->ns->href, SA_METADATA_NS) != 0)
            continue;
        if (count++ == 0)
            found = c;
    }
    if (found == NULL)
        return;

    /* An invalid element counts as the user's: what it means is not known. */
    d->has_element = true;
    d->has_metadata = true;
    if (count > 1) {
        g_set_error(&d->metadata_error, SA_ERROR, SA_ERROR_PARSE,
                    "softaff metadata: %u elements in namespace " SA_METADATA_NS
                    " under <metadata> (allowed: one <" SA_METADATA_ELEMENT ">)",
                    count);
        return;
    }
    if (!sa_metadata_parse_node(found, &d->metadata, &d->record, &d->metadata_attrs,
                                &d->metadata_error)) {
        sa_metadata_init(&d->metadata);
        return;
    }
    /* What softaffd made for a VM without settings holds none of the user's. */
    d->has_metadata = !(d->record.created && d->metadata_attrs == 0);
}

/* An element in one of Nova's namespaces, called name. */
static bool is_nova(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && n->ns != NULL && n->ns->href != NULL &&
           g_str_has_prefix((const char *)n->ns->href, SA_NOVA_NS_PREFIX) &&
           strcmp((const char *)n->name, name) == 0;
}

/* NULL for an empty string: a rule matches what is there. */
static char *nonempty(char *value)
{
    if (value != NULL && value[0] == '\0')
        g_clear_pointer(&value, g_free);
    return value;
}

/* <nova:instance><nova:flavor name="m1.large">: the first of each, in the same namespace (a
 * flavor from another Nova version's namespace is not this instance's). */
static char *nova_flavor(const xmlNode *metadata)
{
    for (const xmlNode *i = metadata->children; i != NULL; i = i->next) {
        if (!is_nova(i, "instance"))
            continue;
        for (const xmlNode *f = i->children; f != NULL; f = f->next)
            if (is_nova(f, "flavor") &&
                strcmp((const char *)f->ns->href, (const char *)i->ns->href) == 0)
                return nonempty(prop(f, "name"));
        return NULL;
    }
    return NULL;
}

/* What a rule can match: <title>, <description>, the Nova flavor. Never fails: these are
 * free text that only the rules read. */
static void parse_rule_subject(const xmlNode *root, SaDomainXml *d)
{
    const xmlNode *n;
    if ((n = child(root, "title")) != NULL)
        d->title = nonempty(text(n));
    if ((n = child(root, "description")) != NULL)
        d->description = nonempty(text(n));
    if ((n = child(root, "metadata")) != NULL)
        d->nova_flavor = nova_flavor(n);
}

SaDomainXml *sa_domain_xml_parse(const char *xml, gsize len, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    g_autoptr(xmlDoc) doc = sa_xml_read(xml, len, WHAT, error);
    if (doc == NULL)
        return NULL;

    const xmlNode *root = xmlDocGetRootElement(doc);
    if (!is_element(root, "domain")) {
        g_autofree char *q = sa_xml_quote((const char *)root->name);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    WHAT ": root element is <%s>%s (expected <domain>)", q,
                    root->ns != NULL ? " with a namespace" : "");
        return NULL;
    }

    g_autoptr(SaDomainXml) d = g_new0(SaDomainXml, 1);
    sa_metadata_init(&d->metadata);

    const xmlNode *n = child(root, "name");
    if (n == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": no <name> element");
        return NULL;
    }
    d->name = text(n);
    if (d->name[0] == '\0') {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": <name> is empty");
        return NULL;
    }
    if ((n = child(root, "uuid")) != NULL)
        d->uuid = text(n);

    if ((n = child(root, "vcpu")) == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, WHAT ": no <vcpu> element");
        return NULL;
    }
    if (!parse_vcpu(n, d, error))
        return NULL;

    if ((n = child(root, "currentMemory")) != NULL || (n = child(root, "memory")) != NULL) {
        if (!parse_memory(n, &d->memory_bytes, error))
            return NULL;
    }

    /* The I/O threads first: <iothreadpin> refers to them. */
    if (!parse_iothreads(root, d, error))
        return NULL;
    if ((n = child(root, "cputune")) != NULL && !parse_cputune(n, d, error))
        return NULL;

    d->has_numatune = child(root, "numatune") != NULL;
    if ((n = child(root, "metadata")) != NULL)
        parse_metadata(n, d);
    parse_rule_subject(root, d);

    /* vcpupin covers at least every current vCPU, NULL where there is none. */
    if (d->vcpupin != NULL && d->vcpupin->len < d->n_vcpus)
        g_ptr_array_set_size(d->vcpupin, (gint)d->n_vcpus);

    return g_steal_pointer(&d);
}
