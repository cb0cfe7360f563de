/* softaff — tests of the metadata element parser, formatter and host check. */
#define G_LOG_DOMAIN "test-metadata"

#include <string.h>

#include "sa-error.h"
#include "sa-metadata.h"

#define NS "xmlns:softaff=\"" SA_METADATA_NS "\""

static SaMetadata parse_ok(const char *xml)
{
    g_autoptr(GError) error = NULL;
    SaMetadata md;

    memset(&md, 0x5a, sizeof(md));
    if (!sa_metadata_parse(xml, strlen(xml), &md, &error))
        g_error("expected %s to parse, got: %s", xml, error->message);
    g_assert_no_error(error);
    return md;
}

/* Parses xml, expects failure with code and (when message is not NULL) exactly that message,
 * (when contains is not NULL) a message containing it. */
static void parse_fails(const char *xml, gsize len, int code, const char *message,
                        const char *contains)
{
    g_autoptr(GError) error = NULL;
    SaMetadata md;

    sa_metadata_init(&md);
    SaMetadata before = md;
    g_assert_false(sa_metadata_parse(xml, len, &md, &error));
    g_assert_nonnull(error);
    g_test_message("%s", error->message);
    g_assert_error(error, SA_ERROR, code);
    if (message != NULL)
        g_assert_cmpstr(error->message, ==, message);
    if (contains != NULL && strstr(error->message, contains) == NULL)
        g_error("error \"%s\" does not contain \"%s\"", error->message, contains);
    g_assert_true(g_str_has_prefix(error->message, "softaff metadata: "));
    /* A failed parse leaves the output alone. */
    g_assert_cmpmem(&md, sizeof(md), &before, sizeof(before));
}

static void parse_fails_str(const char *xml, int code, const char *message, const char *contains)
{
    parse_fails(xml, strlen(xml), code, message, contains);
}

static char *test_data_path(const char *name)
{
    const char *dir = g_getenv("SOFTAFF_TEST_DATA");
    g_assert_nonnull(dir);
    return g_build_filename(dir, "xml", name, NULL);
}

static void test_init(void)
{
    SaMetadata md;

    memset(&md, 0x5a, sizeof(md));
    sa_metadata_init(&md);
    g_assert_cmpint(md.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(md.preferred, ==, -1);
    g_assert_cmpint(md.softness, ==, -1);
    g_assert_cmpint(md.assigned, ==, -1);
}

static void test_parse_documented(void)
{
    SaMetadata md =
        parse_ok("<softaff:affinity " NS " mode=\"soft\" preferred=\"auto\" softness=\"50\"/>");
    g_assert_cmpint(md.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(md.preferred, ==, -1);
    g_assert_cmpint(md.softness, ==, 50);
    g_assert_cmpint(md.assigned, ==, -1);
}

static void test_parse_defaults(void)
{
    SaMetadata md = parse_ok("<softaff:affinity " NS "/>");
    g_assert_cmpint(md.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(md.preferred, ==, -1);
    g_assert_cmpint(md.softness, ==, -1);
    g_assert_cmpint(md.assigned, ==, -1);
}

static void test_parse_values(void)
{
    SaMetadata md = parse_ok("<softaff:affinity " NS
                             " mode=\"strict\" preferred=\"3\" softness=\"0\" assigned=\"7\"/>");
    g_assert_cmpint(md.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(md.preferred, ==, 3);
    g_assert_cmpint(md.softness, ==, 0);
    g_assert_cmpint(md.assigned, ==, 7);

    md = parse_ok("<softaff:affinity " NS " mode=\"off\" softness=\"100\" preferred=\"0\"/>");
    g_assert_cmpint(md.mode, ==, SA_MODE_OFF);
    g_assert_cmpint(md.softness, ==, 100);
    g_assert_cmpint(md.preferred, ==, 0);

    /* Largest id. */
    md = parse_ok("<softaff:affinity " NS " preferred=\"2147483647\" assigned=\"2147483647\"/>");
    g_assert_cmpint(md.preferred, ==, G_MAXINT);
    g_assert_cmpint(md.assigned, ==, G_MAXINT);

    /* Attribute order does not matter; single quotes are XML too. */
    md = parse_ok("<softaff:affinity " NS " softness='10' mode='strict'/>");
    g_assert_cmpint(md.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(md.softness, ==, 10);
}

/* The namespace is matched by URI: any prefix, or a default namespace; or the bare element. */
static void test_parse_namespace_forms(void)
{
    /* Exactly what virDomainGetMetadata(ELEMENT) returns: libvirt strips the namespace. */
    SaMetadata bare = parse_ok("<affinity mode=\"strict\" preferred=\"1\" softness=\"50\"/>");
    g_assert_cmpint(bare.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(bare.preferred, ==, 1);
    g_assert_cmpint(bare.softness, ==, 50);

    SaMetadata md = parse_ok("<affinity xmlns=\"" SA_METADATA_NS "\" preferred=\"1\"/>");
    g_assert_cmpint(md.preferred, ==, 1);

    md = parse_ok("<x:affinity xmlns:x=\"" SA_METADATA_NS "\" softness=\"42\"/>");
    g_assert_cmpint(md.softness, ==, 42);

    /* An XML declaration, comments, blank text and unrelated namespace declarations are fine. */
    md = parse_ok("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- set by hand -->\n"
                  "<softaff:affinity " NS " xmlns:other=\"urn:other\" mode=\"strict\">\n"
                  "  <!-- nothing inside -->\n</softaff:affinity>\n");
    g_assert_cmpint(md.mode, ==, SA_MODE_STRICT);

    /* A declared encoding other than UTF-8 is ignored: the bytes must be UTF-8 anyway. */
    md = parse_ok("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><softaff:affinity " NS
                  " softness=\"5\"/>");
    g_assert_cmpint(md.softness, ==, 5);

    /* Character references are plain text, not entities. */
    md = parse_ok("<softaff:affinity " NS " softness=\"&#52;&#x32;\"/>");
    g_assert_cmpint(md.softness, ==, 42);
}

static void test_parse_bad_values(void)
{
    static const struct {
        const char *attrs;
        int code;
        const char *message;
    } cases[] = {
        {"softness=\"150\"", SA_ERROR_RANGE,
         "softaff metadata: softness=\"150\" is out of range (allowed: 0-100)"},
        {"softness=\"101\"", SA_ERROR_RANGE,
         "softaff metadata: softness=\"101\" is out of range (allowed: 0-100)"},
        {"softness=\"99999999999999999999\"", SA_ERROR_RANGE,
         "softaff metadata: softness=\"99999999999999999999\" is out of range (allowed: 0-100)"},
        {"softness=\"abc\"", SA_ERROR_PARSE,
         "softaff metadata: softness=\"abc\" is not a plain decimal number (allowed: 0-100; no "
         "sign, spaces or leading zeros)"},
        {"softness=\"1x\"", SA_ERROR_PARSE, NULL},
        {"softness=\"+1\"", SA_ERROR_PARSE, NULL},
        {"softness=\"-1\"", SA_ERROR_PARSE, NULL},
        {"softness=\" 1\"", SA_ERROR_PARSE, NULL},
        {"softness=\"1 \"", SA_ERROR_PARSE, NULL},
        {"softness=\"01\"", SA_ERROR_PARSE, NULL},
        {"softness=\"\"", SA_ERROR_PARSE, NULL},
        {"softness=\"5.0\"", SA_ERROR_PARSE, NULL},
        {"softness=\"0x10\"", SA_ERROR_PARSE, NULL},
        {"softness=\"99999999999999999999x\"", SA_ERROR_PARSE, NULL},
        {"softness=\"&#x661;\"", SA_ERROR_PARSE, NULL}, /* ARABIC-INDIC DIGIT ONE */
        {"mode=\"fast\"", SA_ERROR_PARSE,
         "softaff metadata: mode=\"fast\" is not valid (allowed: soft, strict, off)"},
        {"mode=\"Soft\"", SA_ERROR_PARSE, NULL},
        {"mode=\" soft\"", SA_ERROR_PARSE, NULL},
        {"mode=\"\"", SA_ERROR_PARSE,
         "softaff metadata: mode=\"\" is not valid (allowed: soft, strict, off)"},
        {"preferred=\"2147483648\"", SA_ERROR_RANGE,
         "softaff metadata: preferred=\"2147483648\" is out of range (allowed: auto or a "
         "partition id 0-2147483647)"},
        {"preferred=\"-1\"", SA_ERROR_PARSE,
         "softaff metadata: preferred=\"-1\" is not a plain decimal number (allowed: auto or a "
         "partition id 0-2147483647; no sign, spaces or leading zeros)"},
        {"preferred=\"AUTO\"", SA_ERROR_PARSE, NULL},
        {"preferred=\"auto \"", SA_ERROR_PARSE, NULL},
        {"preferred=\"node1\"", SA_ERROR_PARSE, NULL},
        {"assigned=\"auto\"", SA_ERROR_PARSE,
         "softaff metadata: assigned=\"auto\" is not a plain decimal number (allowed: "
         "0-2147483647; no sign, spaces or leading zeros)"},
        {"assigned=\"18446744073709551616\"", SA_ERROR_RANGE, NULL},
        {"node=\"1\"", SA_ERROR_PARSE,
         "softaff metadata: unknown attribute \"node\" (allowed: mode, preferred, softness, "
         "assigned)"},
        {"softaff:mode=\"soft\"", SA_ERROR_PARSE,
         "softaff metadata: attribute \"mode\" in namespace urn:softaff:domain:1 is not known "
         "(allowed, without a prefix: mode, preferred, softness, assigned)"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf("<softaff:affinity " NS " %s/>", cases[i].attrs);
        g_test_message("case %s", cases[i].attrs);
        /* The attribute name (and so the bad value's owner) is always named. */
        g_autofree char *name = g_strndup(cases[i].attrs, strcspn(cases[i].attrs, "="));
        const char *bare = strchr(name, ':') != NULL ? strchr(name, ':') + 1 : name;
        parse_fails_str(xml, cases[i].code, cases[i].message, bare);
    }
}

/* Control characters in a bad value are escaped, long values cut, in the message. */
static void test_error_quoting(void)
{
    parse_fails_str("<softaff:affinity " NS " mode=\"a&#10;b\"/>", SA_ERROR_PARSE,
                    "softaff metadata: mode=\"a\\nb\" is not valid (allowed: soft, strict, off)",
                    NULL);

    g_autofree char *longv = g_strnfill(1000, '7');
    g_autofree char *xml = g_strdup_printf("<softaff:affinity " NS " softness=\"%s\"/>", longv);
    g_autoptr(GError) error = NULL;
    SaMetadata md;
    g_assert_false(sa_metadata_parse(xml, strlen(xml), &md, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_RANGE);
    g_assert_cmpuint(strlen(error->message), <, 200);
    g_assert_nonnull(strstr(error->message, "7777..."));
}

static void test_wrong_element(void)
{
    parse_fails_str("<softaff:affinity xmlns:softaff=\"urn:softaff:domain:2\"/>", SA_ERROR_PARSE,
                    "softaff metadata: root element <affinity> is in namespace "
                    "urn:softaff:domain:2 (expected <affinity> in namespace urn:softaff:domain:1 "
                    "or without a namespace)",
                    NULL);
    parse_fails_str("<affinity xmlns=\"urn:other\" mode=\"soft\"/>", SA_ERROR_PARSE, NULL,
                    "is in namespace urn:other");
    /* The prefix alone means nothing. */
    parse_fails_str("<softaff:affinity xmlns:softaff=\"urn:other\" xmlns:x=\"" SA_METADATA_NS
                    "\"/>",
                    SA_ERROR_PARSE, NULL, "urn:other");
    parse_fails_str("<softaff:pinning " NS "/>", SA_ERROR_PARSE,
                    "softaff metadata: element <pinning> is not known (expected <affinity>)", NULL);
    parse_fails_str("<pinning/>", SA_ERROR_PARSE,
                    "softaff metadata: element <pinning> is not known (expected <affinity>)", NULL);
    parse_fails_str("<affinity><affinity/></affinity>", SA_ERROR_PARSE, NULL,
                    "unexpected element <affinity>");
    parse_fails_str("<softaff:affinity " NS "><softaff:affinity/></softaff:affinity>",
                    SA_ERROR_PARSE,
                    "softaff metadata: unexpected element <affinity> inside <affinity> (allowed: "
                    "<softaffd>, at most once)",
                    NULL);
    parse_fails_str("<softaff:affinity " NS ">50</softaff:affinity>", SA_ERROR_PARSE,
                    "softaff metadata: unexpected text \"50\" inside <affinity> (allowed: "
                    "<softaffd>, at most once)",
                    NULL);
    parse_fails_str("<softaff:affinity " NS "><![CDATA[x]]></softaff:affinity>", SA_ERROR_PARSE,
                    NULL, "unexpected text");
    /* XInclude is never processed: an include element is just a child element. */
    parse_fails_str("<softaff:affinity " NS " xmlns:xi=\"http://www.w3.org/2001/XInclude\">"
                    "<xi:include href=\"/etc/passwd\" parse=\"text\"/></softaff:affinity>",
                    SA_ERROR_PARSE, NULL, "unexpected element <include>");
}

static void test_not_xml(void)
{
    parse_fails("", 0, SA_ERROR_PARSE, "softaff metadata: empty document", NULL);
    parse_fails(NULL, 0, SA_ERROR_PARSE, "softaff metadata: empty document", NULL);
    parse_fails_str("   \n", SA_ERROR_PARSE, NULL, "not well-formed XML");
    parse_fails_str("<softaff:affinity " NS, SA_ERROR_PARSE, NULL, "not well-formed XML: line 1");
    parse_fails_str("softness=50", SA_ERROR_PARSE, NULL, "not well-formed XML");
    parse_fails_str("<softaff:affinity " NS "/><softaff:affinity " NS "/>", SA_ERROR_PARSE, NULL,
                    "Extra content at the end of the document");
    /* Duplicate attributes are not well-formed; libxml2's own words are kept. */
    parse_fails_str("<softaff:affinity " NS " softness=\"1\" softness=\"2\"/>", SA_ERROR_PARSE,
                    NULL, "Attribute softness redefined");
    /* An undeclared prefix. */
    parse_fails_str("<softaff:affinity mode=\"soft\"/>", SA_ERROR_PARSE,
                    "softaff metadata: namespace error: line 1: Namespace prefix softaff on "
                    "affinity is not defined",
                    NULL);
    /* Only the given length counts. */
    const char *doc = "<softaff:affinity " NS " softness=\"1\"/>";
    parse_fails(doc, strlen(doc) - 3, SA_ERROR_PARSE, NULL, "not well-formed XML");
}

static void test_not_utf8(void)
{
    const char *bad = "<softaff:affinity " NS " mode=\"\xff\xfe\"/>";
    g_autofree char *expected = g_strdup_printf(
        "softaff metadata: not valid UTF-8 (byte 0xff at offset %td)", strchr(bad, '\xff') - bad);
    parse_fails_str(bad, SA_ERROR_PARSE, expected, NULL);
    /* An overlong encoding of '/' and a lone continuation byte. */
    parse_fails_str("<softaff:affinity " NS " mode=\"\xc0\xaf\"/>", SA_ERROR_PARSE, NULL,
                    "not valid UTF-8");
    parse_fails_str("\x80<a/>", SA_ERROR_PARSE,
                    "softaff metadata: not valid UTF-8 (byte 0x80 at offset 0)", NULL);
    /* A NUL byte inside the given length. */
    static const char with_nul[] = "<softaff:affinity " NS " mode=\"soft\0\"/>";
    parse_fails(with_nul, sizeof(with_nul) - 1, SA_ERROR_PARSE, NULL, "not valid UTF-8");
    /* UTF-16 with a byte-order mark is not UTF-8 either. */
    static const char utf16[] = "\xff\xfe<\0a\0/\0>\0";
    parse_fails(utf16, sizeof(utf16) - 1, SA_ERROR_PARSE, NULL, "not valid UTF-8");
}

static void test_dtd_and_entities(void)
{
    static const char *const files[] = {"billion-laughs.xml", "external-entity.xml"};

    for (gsize i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = test_data_path(files[i]);
        g_autofree char *xml = NULL;
        gsize len = 0;
        g_autoptr(GError) error = NULL;
        g_assert_true(g_file_get_contents(path, &xml, &len, &error));
        g_assert_no_error(error);
        parse_fails(xml, len, SA_ERROR_PARSE,
                    "softaff metadata: document type declarations (<!DOCTYPE>, entities) are "
                    "not allowed",
                    NULL);
    }

    /* A DOCTYPE without an internal subset, with an external one, and a parameter entity. */
    parse_fails_str("<!DOCTYPE affinity><affinity xmlns=\"" SA_METADATA_NS "\"/>", SA_ERROR_PARSE,
                    NULL, "not allowed");
    parse_fails_str(
        "<!DOCTYPE affinity SYSTEM \"http://127.0.0.1:1/x.dtd\"><affinity xmlns=\"" SA_METADATA_NS
        "\"/>",
        SA_ERROR_PARSE, NULL, "not allowed");
    parse_fails_str("<!DOCTYPE a [<!ENTITY % p SYSTEM \"file:///etc/passwd\"> %p;]>"
                    "<affinity xmlns=\"" SA_METADATA_NS "\"/>",
                    SA_ERROR_PARSE, NULL, "not allowed");
    /* An entity reference without a declaration is not well-formed. */
    parse_fails_str("<softaff:affinity " NS " mode=\"&soft;\"/>", SA_ERROR_PARSE, NULL,
                    "Entity 'soft' not defined");
    parse_fails_str("<softaff:affinity " NS ">&passwd;</softaff:affinity>", SA_ERROR_PARSE, NULL,
                    "Entity 'passwd' not defined");
}

static void test_huge(void)
{
    /* A valid element padded with a comment to just over the limit. */
    const char *head = "<softaff:affinity " NS " softness=\"1\"/><!--";
    const char *tail = "-->";
    gsize len = SA_XML_MAX_BYTES + 1;
    g_autofree char *xml = g_malloc(len + 1);
    memset(xml, 'x', len);
    memcpy(xml, head, strlen(head));
    memcpy(xml + len - strlen(tail), tail, strlen(tail));
    xml[len] = '\0';

    g_autofree char *expected = g_strdup_printf("softaff metadata: document of %" G_GSIZE_FORMAT
                                                " bytes is too large (allowed: at most %d)",
                                                len, SA_XML_MAX_BYTES);
    parse_fails(xml, len, SA_ERROR_RANGE, expected, NULL);

    /* One byte less is accepted: the limit is exact. */
    memcpy(xml + len - 1 - strlen(tail), tail, strlen(tail));
    SaMetadata md;
    g_autoptr(GError) error = NULL;
    g_assert_true(sa_metadata_parse(xml, len - 1, &md, &error));
    g_assert_no_error(error);
    g_assert_cmpint(md.softness, ==, 1);

    /* Many attributes of an unknown kind: the first is named. */
    GString *many = g_string_new("<softaff:affinity " NS);
    for (int i = 0; i < 10000; i++)
        g_string_append_printf(many, " a%d=\"%d\"", i, i);
    g_string_append(many, "/>");
    parse_fails(many->str, many->len, SA_ERROR_PARSE, NULL, "unknown attribute \"a0\"");
    g_string_free(many, TRUE);

    /* Deep nesting is refused (by libxml2's depth limit or as a child element). */
    GString *deep = g_string_new("<softaff:affinity " NS ">");
    for (int i = 0; i < 5000; i++)
        g_string_append(deep, "<a>");
    for (int i = 0; i < 5000; i++)
        g_string_append(deep, "</a>");
    g_string_append(deep, "</softaff:affinity>");
    parse_fails(deep->str, deep->len, SA_ERROR_PARSE, NULL, NULL);
    g_string_free(deep, TRUE);
}

static void test_format(void)
{
    SaMetadata md;
    g_autofree char *a = NULL;
    g_autofree char *b = NULL;
    g_autofree char *c = NULL;

    sa_metadata_init(&md);
    a = sa_metadata_format(&md);
    g_assert_cmpstr(a, ==, "<affinity mode=\"soft\" preferred=\"auto\"/>");

    md.mode = SA_MODE_STRICT;
    md.preferred = 2;
    md.softness = 0;
    b = sa_metadata_format(&md);
    g_assert_cmpstr(b, ==, "<affinity mode=\"strict\" preferred=\"2\" softness=\"0\"/>");

    md.mode = SA_MODE_SOFT;
    md.preferred = -1;
    md.softness = 50;
    md.assigned = 1;
    c = sa_metadata_format(&md);
    g_assert_cmpstr(c, ==,
                    "<affinity mode=\"soft\" preferred=\"auto\" softness=\"50\" assigned=\"1\"/>");
}

/* format, then parse with the namespace libvirt adds, gives back the same values. */
static void test_round_trip(void)
{
    static const SaMode modes[] = {SA_MODE_SOFT, SA_MODE_STRICT, SA_MODE_OFF};
    static const int ids[] = {-1, 0, 1, 17, G_MAXINT};
    static const int softness[] = {-1, 0, 1, 50, 99, 100};

    for (gsize m = 0; m < G_N_ELEMENTS(modes); m++)
        for (gsize p = 0; p < G_N_ELEMENTS(ids); p++)
            for (gsize s = 0; s < G_N_ELEMENTS(softness); s++)
                for (gsize a = 0; a < G_N_ELEMENTS(ids); a++) {
                    SaMetadata in = {modes[m], ids[p], softness[s], ids[a]};
                    SaMetadata out;
                    g_autoptr(GError) error = NULL;
                    g_autofree char *text = sa_metadata_format(&in);
                    g_assert_true(g_str_has_prefix(text, "<affinity "));
                    g_autofree char *xml = g_strdup_printf(
                        "<affinity xmlns=\"" SA_METADATA_NS "\"%s", text + strlen("<affinity"));
                    g_assert_true(sa_metadata_parse(xml, strlen(xml), &out, &error));
                    g_assert_no_error(error);
                    g_assert_cmpmem(&in, sizeof(in), &out, sizeof(out));
                }
}

/* A hand-built topology: partitions with sparse ids 0 and 2. */
static SaTopology *make_topology(const guint *ids, guint n)
{
    SaTopology *topo = g_new0(SaTopology, 1);

    topo->layout = SA_LAYOUT_NODE;
    topo->partitions = g_ptr_array_new();
    for (guint i = 0; i < n; i++) {
        SaPartition *p = g_new0(SaPartition, 1);
        p->id = ids[i];
        p->cpus = sa_cpuset_new();
        sa_cpuset_add_range(p->cpus, i * 4, i * 4 + 3);
        p->node = (int)i;
        g_ptr_array_add(topo->partitions, p);
    }
    return topo;
}

static void free_topology(SaTopology *topo)
{
    for (guint i = 0; i < topo->partitions->len; i++) {
        SaPartition *p = g_ptr_array_index(topo->partitions, i);
        sa_cpuset_free(p->cpus);
        g_free(p);
    }
    g_ptr_array_unref(topo->partitions);
    g_free(topo);
}

static void test_check_host(void)
{
    static const guint ids[] = {0, 2};
    SaTopology *topo = make_topology(ids, G_N_ELEMENTS(ids));
    SaMetadata md;

    sa_metadata_init(&md);
    {
        g_autoptr(GError) error = NULL;
        g_assert_true(sa_metadata_check_host(&md, topo, &error));
        g_assert_no_error(error);
    }
    md.preferred = 2;
    md.assigned = 0;
    {
        g_autoptr(GError) error = NULL;
        g_assert_true(sa_metadata_check_host(&md, topo, &error));
        g_assert_no_error(error);
    }
    md.preferred = 1;
    {
        g_autoptr(GError) error = NULL;
        g_assert_false(sa_metadata_check_host(&md, topo, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
        g_assert_cmpstr(error->message, ==,
                        "softaff metadata: preferred=\"1\" names no partition of this host "
                        "(partitions of layout node: 0, 2)");
    }
    md.preferred = -1;
    md.assigned = 5;
    {
        g_autoptr(GError) error = NULL;
        g_assert_false(sa_metadata_check_host(&md, topo, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
        g_assert_cmpstr(error->message, ==,
                        "softaff metadata: assigned=\"5\" names no partition of this host "
                        "(partitions of layout node: 0, 2)");
    }
    free_topology(topo);

    /* A host without partitions. */
    topo = make_topology(NULL, 0);
    topo->layout = SA_LAYOUT_LLC;
    md.assigned = 0;
    {
        g_autoptr(GError) error = NULL;
        g_assert_false(sa_metadata_check_host(&md, topo, &error));
        g_assert_cmpstr(error->message, ==,
                        "softaff metadata: assigned=\"0\" names no partition of this host "
                        "(partitions of layout llc: none)");
    }
    free_topology(topo);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/metadata/init", test_init);
    g_test_add_func("/metadata/parse/documented", test_parse_documented);
    g_test_add_func("/metadata/parse/defaults", test_parse_defaults);
    g_test_add_func("/metadata/parse/values", test_parse_values);
    g_test_add_func("/metadata/parse/namespace-forms", test_parse_namespace_forms);
    g_test_add_func("/metadata/parse/bad-values", test_parse_bad_values);
    g_test_add_func("/metadata/parse/error-quoting", test_error_quoting);
    g_test_add_func("/metadata/parse/wrong-element", test_wrong_element);
    g_test_add_func("/metadata/parse/not-xml", test_not_xml);
    g_test_add_func("/metadata/parse/not-utf8", test_not_utf8);
    g_test_add_func("/metadata/parse/dtd-and-entities", test_dtd_and_entities);
    g_test_add_func("/metadata/parse/huge", test_huge);
    g_test_add_func("/metadata/format", test_format);
    g_test_add_func("/metadata/round-trip", test_round_trip);
    g_test_add_func("/metadata/check-host", test_check_host);

    return g_test_run();
}
