/* softaff — rewriting a domain XML's softaff element for this host (incoming migration,
 * restore): what names a partition of the source host is made valid here, and the pins softaff
 * set give way to the VM's own settings that softaffd recorded. */
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

/* The blank text node just before n (its indentation), or NULL. */
static xmlNode *blank_before(const xmlNode *n)
{
    xmlNode *p = n->prev;
    return p != NULL && p->type == XML_TEXT_NODE && sa_xml_is_blank(p->content) ? p : NULL;
}

/* Unlinks and frees n with its indentation. */
static void remove_node(xmlNode *n)
{
    xmlNode *blank = blank_before(n);

    if (blank != NULL) {
        xmlUnlinkNode(blank);
        xmlFreeNode(blank);
    }
    xmlUnlinkNode(n);
    xmlFreeNode(n);
}

/* Links n into parent before next (NULL: last) as it is: xmlAddPrevSibling and friends merge
 * adjacent text nodes, and indentation is inserted as separate text nodes here. */
static void link_before(xmlNode *parent, xmlNode *next, xmlNode *n)
{
    n->parent = parent;
    n->next = next;
    n->prev = next != NULL ? next->prev : parent->last;
    if (n->prev != NULL)
        n->prev->next = n;
    else
        parent->children = n;
    if (next != NULL)
        next->prev = n;
    else
        parent->last = n;
}

static char *node_prop(const xmlNode *n, const char *name)
{
    xmlChar *raw = xmlGetNoNsProp(n, (const xmlChar *)name);
    char *value = raw != NULL ? g_strdup((const char *)raw) : NULL;
    xmlFree(raw);
    return value;
}

/* <vcpu cpuset> becomes the recorded one, or goes when none was recorded. */
static bool restore_vcpu_cpuset(xmlNode *root, const SaOwnPins *own, const char *qname,
                                bool *changed, GError **error)
{
    xmlNode *vcpu = plain_child(root, "vcpu");
    if (vcpu == NULL)
        return true; /* nothing to restore onto: libvirt refuses such a document anyway */

    g_autofree char *now = node_prop(vcpu, "cpuset");
    g_autoptr(SaCpuSet) set =
        now != NULL ? sa_xml_parse_cpuset(WHAT, "<vcpu cpuset>", now, NULL) : NULL;
    if (now == NULL && own->vcpu_cpuset == NULL)
        return true;
    if (set != NULL && own->vcpu_cpuset != NULL && sa_cpuset_equal(set, own->vcpu_cpuset))
        return true;

    if (own->vcpu_cpuset == NULL) {
        if (xmlUnsetProp(vcpu, (const xmlChar *)"cpuset") != 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, WHAT ": cannot remove <vcpu cpuset>");
            return false;
        }
        g_message("domain %s: removed <vcpu cpuset=\"%s\"> (the VM had none before softaff "
                  "pinned it)",
                  qname, now);
    } else {
        g_autofree char *text = sa_cpuset_format(own->vcpu_cpuset);
        if (xmlSetProp(vcpu, (const xmlChar *)"cpuset", (const xmlChar *)text) == NULL) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, WHAT ": cannot set <vcpu cpuset>");
            return false;
        }
        g_message("domain %s: <vcpu cpuset> \"%s\" restored to the VM's own \"%s\"", qname,
                  now != NULL ? now : "(none)", text);
    }
    *changed = true;
    return true;
}

static bool is_pin(const xmlNode *n)
{
    return is_plain_element(n, "vcpupin") || is_plain_element(n, "emulatorpin") ||
           is_plain_element(n, "iothreadpin");
}

/* One pin element of <cputune> into pins; false when it cannot be read or repeats. */
static bool read_pin(const xmlNode *n, SaOwnPins *pins)
{
    g_autofree char *cpuset = node_prop(n, "cpuset");
    g_autofree char *id_text = node_prop(n, is_plain_element(n, "vcpupin") ? "vcpu" : "iothread");
    g_autoptr(SaCpuSet) set =
        cpuset != NULL ? sa_xml_parse_cpuset(WHAT, "cpuset", cpuset, NULL) : NULL;
    guint64 id = 0;

    if (set == NULL)
        return false;
    if (is_plain_element(n, "emulatorpin")) {
        if (pins->emulatorpin != NULL)
            return false;
        pins->emulatorpin = g_steal_pointer(&set);
        return true;
    }
    if (sa_xml_parse_number(id_text, G_MAXINT - 1, &id) != SA_XML_NUMBER_OK)
        return false;
    if (is_plain_element(n, "vcpupin")) {
        if (pins->vcpupin != NULL && id < pins->vcpupin->len &&
            g_ptr_array_index(pins->vcpupin, id) != NULL)
            return false;
        sa_own_pins_set_vcpu(pins, (guint)id, set);
        return true;
    }
    if (id == 0 || sa_own_pins_iothread(pins, (guint)id) != NULL)
        return false;
    sa_own_pins_set_iothread(pins, (guint)id, set);
    return true;
}

/* Whether <cputune> (may be NULL) holds exactly the pins of own. */
static bool pins_match(const xmlNode *cputune, const SaOwnPins *own)
{
    g_autoptr(SaOwnPins) now = sa_own_pins_new();

    now->n_vcpus = own->n_vcpus;
    if (own->vcpu_cpuset != NULL)
        now->vcpu_cpuset = sa_cpuset_copy(own->vcpu_cpuset);
    for (const xmlNode *c = cputune != NULL ? cputune->children : NULL; c != NULL; c = c->next)
        if (is_pin(c) && !read_pin(c, now))
            return false;
    return sa_own_pins_equal(now, own);
}

/* A new, empty <cputune> after <vcpu>, indented like it; *indent is its children's. */
static xmlNode *new_cputune(xmlNode *root, char **indent)
{
    xmlNode *vcpu = plain_child(root, "vcpu");
    xmlNode *blank = vcpu != NULL ? blank_before(vcpu) : NULL;
    xmlNode *cputune = xmlNewDocNode(root->doc, NULL, (const xmlChar *)"cputune", NULL);

    link_before(root, vcpu != NULL ? vcpu->next : NULL, cputune);
    if (blank != NULL) {
        link_before(root, cputune, xmlNewDocText(root->doc, blank->content));
        link_before(cputune, NULL, xmlNewDocText(root->doc, blank->content));
        *indent = g_strconcat((const char *)blank->content, "  ", NULL);
    }
    return cputune;
}

static xmlNode *new_pin(xmlDoc *doc, const char *name, const char *id_attr, guint id,
                        const SaCpuSet *set)
{
    xmlNode *n = xmlNewDocNode(doc, NULL, (const xmlChar *)name, NULL);
    g_autofree char *text = sa_cpuset_format(set);

    if (id_attr != NULL) {
        char id_text[16];
        g_snprintf(id_text, sizeof(id_text), "%u", id);
        xmlNewProp(n, (const xmlChar *)id_attr, (const xmlChar *)id_text);
    }
    xmlNewProp(n, (const xmlChar *)"cpuset", (const xmlChar *)text);
    return n;
}

/* The recorded pins as elements, in libvirt's order, with a description for the log. */
static GPtrArray *new_pins(xmlDoc *doc, const SaOwnPins *own, GString *said)
{
    GPtrArray *nodes = g_ptr_array_new();

    for (guint v = 0; own->vcpupin != NULL && v < own->vcpupin->len; v++) {
        const SaCpuSet *set = g_ptr_array_index(own->vcpupin, v);
        if (set == NULL)
            continue;
        g_ptr_array_add(nodes, new_pin(doc, "vcpupin", "vcpu", v, set));
        g_autofree char *text = sa_cpuset_format(set);
        g_string_append_printf(said, "%svcpu %u: %s", said->len ? ", " : "", v, text);
    }
    if (own->emulatorpin != NULL) {
        g_ptr_array_add(nodes, new_pin(doc, "emulatorpin", NULL, 0, own->emulatorpin));
        g_autofree char *text = sa_cpuset_format(own->emulatorpin);
        g_string_append_printf(said, "%semulator: %s", said->len ? ", " : "", text);
    }
    for (guint i = 0; own->iothread_ids != NULL && i < own->iothread_ids->len; i++) {
        guint id = g_array_index(own->iothread_ids, guint, i);
        const SaCpuSet *set = g_ptr_array_index(own->iothreadpin, i);
        g_ptr_array_add(nodes, new_pin(doc, "iothreadpin", "iothread", id, set));
        g_autofree char *text = sa_cpuset_format(set);
        g_string_append_printf(said, "%siothread %u: %s", said->len ? ", " : "", id, text);
    }
    return nodes;
}

/* Inserts nodes into cputune where its first pin is (or at the end, before the closing
 * indentation), each indented; then removes the old pins. Returns how many were removed. */
static guint swap_pins(xmlNode *cputune, GPtrArray *nodes, const char *indent)
{
    g_autoptr(GPtrArray) old = g_ptr_array_new();
    xmlNode *anchor = NULL;

    for (xmlNode *c = cputune->children; c != NULL; c = c->next)
        if (is_pin(c))
            g_ptr_array_add(old, c);
    if (old->len > 0)
        anchor = g_ptr_array_index(old, 0);
    else if (cputune->last != NULL && cputune->last->type == XML_TEXT_NODE &&
             sa_xml_is_blank(cputune->last->content))
        anchor = cputune->last;

    /* Before an old pin: "pin, indent" (the old pin's indentation goes with it); before the
     * closing indentation: "indent, pin". */
    for (guint i = 0; i < nodes->len; i++) {
        xmlNode *text =
            indent != NULL ? xmlNewDocText(cputune->doc, (const xmlChar *)indent) : NULL;
        if (text != NULL && old->len == 0)
            link_before(cputune, anchor, text);
        link_before(cputune, anchor, g_ptr_array_index(nodes, i));
        if (text != NULL && old->len > 0)
            link_before(cputune, anchor, text);
    }
    for (guint i = 0; i < old->len; i++)
        remove_node(g_ptr_array_index(old, i));
    return old->len;
}

static bool has_element_child(const xmlNode *n)
{
    for (const xmlNode *c = n->children; c != NULL; c = c->next)
        if (c->type == XML_ELEMENT_NODE)
            return true;
    return false;
}

/* <cputune>'s <vcpupin>, <emulatorpin>, <iothreadpin> become exactly the recorded ones; its
 * other children stay as they are. A <cputune> left empty goes. */
static void restore_cputune(xmlNode *root, const SaOwnPins *own, const char *qname, bool *changed)
{
    xmlNode *cputune = plain_child(root, "cputune");
    g_autofree char *indent = NULL;

    if (pins_match(cputune, own))
        return;
    if (cputune == NULL)
        cputune = new_cputune(root, &indent);
    for (const xmlNode *c = cputune->children; indent == NULL && c != NULL; c = c->next)
        if (c->type == XML_ELEMENT_NODE && blank_before(c) != NULL)
            indent = g_strdup((const char *)blank_before(c)->content);

    g_autoptr(GString) said = g_string_new(NULL);
    g_autoptr(GPtrArray) nodes = new_pins(root->doc, own, said);
    guint removed = swap_pins(cputune, nodes, indent);
    if (!has_element_child(cputune))
        remove_node(cputune);
    g_message("domain %s: <cputune>: %u pin(s) replaced by the VM's own as softaffd recorded "
              "them (%s)",
              qname, removed, said->len > 0 ? said->str : "no pin");
    *changed = true;
}

/* The domain's vCPUs at most (<vcpu>'s text), 0 when it cannot be read. */
static guint max_vcpus(xmlNode *root)
{
    xmlNode *vcpu = plain_child(root, "vcpu");
    xmlChar *raw = vcpu != NULL ? xmlNodeGetContent(vcpu) : NULL;
    g_autofree char *text = g_strstrip(g_strdup(raw != NULL ? (const char *)raw : ""));
    guint64 n = 0;

    xmlFree(raw);
    return sa_xml_parse_number(text, G_MAXUINT, &n) == SA_XML_NUMBER_OK ? (guint)n : 0;
}

static bool has_iothread(const SaDomainXml *d, guint id)
{
    for (guint i = 0; d->iothread_ids != NULL && i < d->iothread_ids->len; i++)
        if (g_array_index(d->iothread_ids, guint, i) == id)
            return true;
    return false;
}

/* own without the pins of vCPUs and I/O threads the domain no longer has (a vCPU or I/O
 * thread removed since the record): libvirt refuses such a pin, and so would the restore or
 * migration. d may be NULL (the domain could not be read): nothing is left out. */
static SaOwnPins *fit_to_domain(const SaOwnPins *own, xmlNode *root, const SaDomainXml *d,
                                const char *qname)
{
    SaOwnPins *fit = sa_own_pins_copy(own);
    guint max = max_vcpus(root);

    /* From the top: removing a pin may shorten the array, never below the next one. */
    for (guint v = fit->vcpupin != NULL ? fit->vcpupin->len : 0; max > 0 && v > max; v--) {
        if (fit->vcpupin == NULL || v > fit->vcpupin->len ||
            g_ptr_array_index(fit->vcpupin, v - 1) == NULL)
            continue;
        g_message("domain %s: recorded <vcpupin vcpu=\"%u\"> left out: the domain has %u vCPUs",
                  qname, v - 1, max);
        sa_own_pins_set_vcpu(fit, v - 1, NULL);
    }
    for (guint i = 0; d != NULL && fit->iothread_ids != NULL && i < fit->iothread_ids->len;) {
        guint id = g_array_index(fit->iothread_ids, guint, i);
        if (has_iothread(d, id)) {
            i++;
            continue;
        }
        g_message("domain %s: recorded <iothreadpin iothread=\"%u\"> left out: the domain has "
                  "no such I/O thread",
                  qname, id);
        sa_own_pins_set_iothread(fit, id, NULL);
    }
    return fit;
}

/* The child <softaffd> of the softaff element, or NULL. */
static xmlNode *record_node(xmlNode *element)
{
    for (xmlNode *c = element->children; c != NULL; c = c->next)
        if (sa_xml_is_ours(c) && strcmp((const char *)c->name, "softaffd") == 0)
            return c;
    return NULL;
}

/* What the parse of the softaff element gave. */
typedef struct {
    SaMetadata md;
    SaMetadataRecord rec;
    guint attrs;
} Element;

/* assigned (the source host's home, on <affinity> as earlier versions wrote it, or in
 * <softaffd>) and the record go: this host's daemon chooses and records again. */
static bool drop_daemon_data(xmlNode *element, const Element *e, const char *qname, bool *changed,
                             GError **error)
{
    xmlNode *record = record_node(element);

    if (xmlHasNsProp(element, (const xmlChar *)"assigned", NULL) != NULL &&
        xmlUnsetProp(element, (const xmlChar *)"assigned") != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO,
                    WHAT ": cannot remove assigned= from the softaff element");
        return false;
    }
    if (e->md.assigned >= 0)
        g_message("domain %s: dropped assigned=\"%d\" (the home chosen on the source host)", qname,
                  e->md.assigned);
    if (record != NULL) {
        remove_node(record);
        g_message("domain %s: dropped softaffd's <softaffd> record from the softaff element",
                  qname);
    }
    *changed = *changed || e->md.assigned >= 0 || record != NULL;
    return true;
}

static bool preferred_to_auto(xmlNode *element, const Element *e, const SaTopology *topo,
                              const char *qname, bool *changed, GError **error)
{
    if (e->md.preferred < 0 || sa_topology_find_partition(topo, (guint)e->md.preferred) >= 0)
        return true;
    if (xmlSetProp(element, (const xmlChar *)"preferred", (const xmlChar *)"auto") == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO,
                    WHAT ": cannot set preferred=\"auto\" on the softaff element");
        return false;
    }
    g_autofree char *ids = sa_topology_format_ids(topo);
    g_message("domain %s: preferred=\"%d\" names no partition of this host (partitions of "
              "layout %s: %s): using preferred=\"auto\"",
              qname, e->md.preferred, sa_layout_to_string(topo->layout), ids);
    *changed = true;
    return true;
}

/* The domain's name, quoted for messages. */
static char *quoted_name(xmlNode *root)
{
    xmlNode *name_node = plain_child(root, "name");
    xmlChar *raw_name = name_node != NULL ? xmlNodeGetContent(name_node) : NULL;
    g_autofree char *name = g_strstrip(g_strdup(raw_name != NULL ? (const char *)raw_name : ""));
    xmlFree(raw_name);
    return sa_xml_quote(name[0] != '\0' ? name : "(no name)");
}

/* Rewrites the document for the valid softaff element e (parsed from element). */
static bool rewrite_element(xmlNode *root, xmlNode *element, const Element *e, const SaDomainXml *d,
                            const SaTopology *topo, bool *changed, GError **error)
{
    g_autofree char *qname = quoted_name(root);

    if (e->rec.own != NULL) {
        g_autoptr(SaOwnPins) own = fit_to_domain(e->rec.own, root, d, qname);
        if (!restore_vcpu_cpuset(root, own, qname, changed, error))
            return false;
        restore_cputune(root, own, qname, changed);
    }
    if (!drop_daemon_data(element, e, qname, changed, error))
        return false;
    /* softaffd made it for a VM without settings: gone with the record, as it was. */
    if (e->rec.created && e->attrs == 0) {
        remove_node(element);
        g_message("domain %s: removed the softaff element softaffd created (it holds no "
                  "setting of the user)",
                  qname);
        *changed = true;
        return true;
    }
    return preferred_to_auto(element, e, topo, qname, changed, error);
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
    Element e = {0};
    if (!sa_metadata_parse_node(element, &e.md, &e.rec, &e.attrs, error))
        return false;
    bool changed = false;
    /* The domain as softaff reads it, for its I/O thread ids. */
    g_autoptr(SaDomainXml) d = e.rec.own != NULL ? sa_domain_xml_parse(xml, len, NULL) : NULL;
    bool ok = rewrite_element(root, element, &e, d, topo, &changed, error);
    sa_metadata_record_clear(&e.rec);
    if (!ok || !changed)
        return ok;

    char *text = serialize(doc, error);
    if (text == NULL)
        return false;
    *out = text;
    return true;
}
