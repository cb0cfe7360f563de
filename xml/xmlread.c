/* softaff — reading untrusted XML with libxml2, safely. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-xml-private.h"

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#include "sa-error.h"

typedef struct {
    bool saw_dtd;
    char *first_error; /* libxml2's first message, without the trailing newline */
    int first_line;
} ReadState;

/* libxml2 passes the parser context (its userData) to the SAX serror handler. */
static void on_structured_error(void *user_data, xmlErrorPtr err)
{
    xmlParserCtxtPtr pctxt = user_data;
    ReadState *st = pctxt != NULL ? pctxt->_private : NULL;

    if (st == NULL)
        return;

    if (st->first_error != NULL || err == NULL || err->level < XML_ERR_ERROR)
        return;
    st->first_error = g_strchomp(g_strdup(err->message != NULL ? err->message : "unknown error"));
    st->first_line = err->line;
}

/* Called on <!DOCTYPE ...> before its internal subset is read: refuse the document there, so no
 * entity is ever declared, loaded or expanded. */
static void on_internal_subset(void *ctx, const xmlChar *name, const xmlChar *external_id,
                               const xmlChar *system_id)
{
    xmlParserCtxtPtr pctxt = ctx;
    ReadState *st = pctxt->_private;

    st->saw_dtd = true;
    xmlStopParser(pctxt);
}

/* Defence in depth: no DTD or entity reference node may survive into the tree we hand out. */
static bool tree_has_entities(const xmlNode *node)
{
    for (; node != NULL; node = node->next) {
        switch (node->type) {
        case XML_DTD_NODE:
        case XML_ENTITY_REF_NODE:
        case XML_ENTITY_NODE:
        case XML_ENTITY_DECL:
        case XML_XINCLUDE_START:
        case XML_XINCLUDE_END:
            return true;
        case XML_ELEMENT_NODE:
            for (const xmlAttr *a = node->properties; a != NULL; a = a->next)
                if (tree_has_entities(a->children))
                    return true;
            break;
        default:
            break;
        }
        if (node->type != XML_ATTRIBUTE_NODE && tree_has_entities(node->children))
            return true;
    }
    return false;
}

static void init_libxml_once(void)
{
    static gsize done;

    if (g_once_init_enter(&done)) {
        xmlInitParser();
        g_once_init_leave(&done, 1);
    }
}

xmlDoc *sa_xml_read(const char *xml, gsize len, const char *what, GError **error)
{
    const int options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                        XML_PARSE_NOCDATA | XML_PARSE_IGNORE_ENC;
    ReadState st = {0};
    const char *bad = NULL;

    g_return_val_if_fail(what != NULL, NULL);

    if (xml == NULL || len == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: empty document", what);
        return NULL;
    }
    if (len > SA_XML_MAX_BYTES) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                    "%s: document of %" G_GSIZE_FORMAT " bytes is too large (allowed: at most %d)",
                    what, len, SA_XML_MAX_BYTES);
        return NULL;
    }
    /* libxml2 takes an int length; SA_XML_MAX_BYTES keeps len far below G_MAXINT. */
    if (!g_utf8_validate_len(xml, len, &bad)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "%s: not valid UTF-8 (byte 0x%02x at offset %td)", what,
                    (unsigned)(unsigned char)*bad, bad - xml);
        return NULL;
    }

    init_libxml_once();

    xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (ctxt == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "%s: cannot create an XML parser", what);
        return NULL;
    }
    /* Both callbacks below get userData as their first argument: keep it the context. */
    ctxt->userData = ctxt;
    ctxt->_private = &st;
    ctxt->sax->serror = on_structured_error;
    ctxt->sax->internalSubset = on_internal_subset;
    ctxt->sax->externalSubset = NULL;

    xmlDoc *doc = xmlCtxtReadMemory(ctxt, xml, (int)len, NULL, "UTF-8", options);
    bool well_formed = ctxt->wellFormed != 0;
    bool ns_well_formed = ctxt->nsWellFormed != 0;

    xmlFreeParserCtxt(ctxt);

    if (st.saw_dtd) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "%s: document type declarations (<!DOCTYPE>, entities) are not allowed", what);
        g_clear_pointer(&doc, xmlFreeDoc);
    } else if (doc == NULL || !well_formed) {
        if (st.first_error != NULL)
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: not well-formed XML: line %d: %s",
                        what, st.first_line, st.first_error);
        else
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: not well-formed XML", what);
        g_clear_pointer(&doc, xmlFreeDoc);
    } else if (!ns_well_formed) {
        /* e.g. a prefix without its xmlns declaration: the namespace would be guessed wrong. */
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: namespace error: line %d: %s", what,
                    st.first_line, st.first_error != NULL ? st.first_error : "unknown");
        g_clear_pointer(&doc, xmlFreeDoc);
    } else if (tree_has_entities(doc->children)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: entity references are not allowed", what);
        g_clear_pointer(&doc, xmlFreeDoc);
    } else if (xmlDocGetRootElement(doc) == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no root element", what);
        g_clear_pointer(&doc, xmlFreeDoc);
    }
    g_free(st.first_error);
    return doc;
}

char *sa_xml_attr_value(const xmlAttr *attr)
{
    xmlChar *raw = xmlNodeListGetString(attr->doc, attr->children, 1);
    char *value = g_strdup(raw != NULL ? (const char *)raw : "");
    xmlFree(raw);
    return value;
}

bool sa_xml_is_blank(const xmlChar *text)
{
    for (const xmlChar *p = text; p != NULL && *p != '\0'; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    return true;
}

bool sa_xml_is_ours(const xmlNode *n)
{
    return n->type == XML_ELEMENT_NODE &&
           (n->ns == NULL || g_strcmp0((const char *)n->ns->href, SA_METADATA_NS) == 0);
}

void sa_xml_unexpected_element(const xmlNode *c, const char *parent, const char *allowed,
                               GError **error)
{
    g_autofree char *q = sa_xml_quote((const char *)c->name);
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                "softaff metadata: unexpected element <%s> inside <%s> (allowed: %s)", q, parent,
                allowed);
}

SaXmlChild sa_xml_child_kind(const xmlNode *c, const char *parent, const char *allowed,
                             GError **error)
{
    if (c->type == XML_ELEMENT_NODE && !sa_xml_is_ours(c)) {
        g_autofree char *q = sa_xml_quote((const char *)c->name);
        g_autofree char *qns = sa_xml_quote((const char *)c->ns->href);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "softaff metadata: unexpected element <%s> in namespace %s inside <%s> "
                    "(allowed: %s)",
                    q, qns, parent, allowed);
        return SA_XML_CHILD_BAD;
    }
    if (c->type == XML_ELEMENT_NODE)
        return SA_XML_CHILD_ELEMENT;
    if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) &&
        !sa_xml_is_blank(c->content)) {
        g_autofree char *q = sa_xml_quote((const char *)c->content);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "softaff metadata: unexpected text \"%s\" inside <%s> (allowed: %s)", q, parent,
                    allowed);
        return SA_XML_CHILD_BAD;
    }
    return SA_XML_CHILD_SKIP;
}

SaCpuSet *sa_xml_parse_cpuset(const char *what, const char *where, const char *value,
                              GError **error)
{
    g_autoptr(SaCpuSet) set = sa_cpuset_new();
    g_autoptr(SaCpuSet) removed = sa_cpuset_new();
    g_auto(GStrv) parts = g_strsplit(value, ",", -1);
    g_autoptr(GError) local = NULL;

    for (char **p = parts; *p != NULL; p++) {
        const char *item = g_strstrip(*p);
        bool negate = item[0] == '^';
        g_autoptr(SaCpuSet) one = NULL;

        if (item[0] != '\0' && !(negate && item[1] == '\0'))
            one = sa_cpuset_parse(negate ? item + 1 : item, &local);
        if (one == NULL || (negate && sa_cpuset_count(one) != 1)) {
            g_autofree char *q = sa_xml_quote(value);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s \"%s\" is not a cpuset%s%s", what,
                        where, q, local != NULL ? ": " : "", local != NULL ? local->message : "");
            return NULL;
        }
        sa_cpuset_union(negate ? removed : set, one);
    }
    sa_cpuset_subtract(set, removed);
    if (sa_cpuset_is_empty(set)) {
        g_autofree char *q = sa_xml_quote(value);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s \"%s\" names no CPU", what, where, q);
        return NULL;
    }
    return g_steal_pointer(&set);
}
