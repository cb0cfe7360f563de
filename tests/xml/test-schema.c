/* softaff — xml/softaff-domain.rng and the metadata parser agree: on every example in
 * xml/examples/ (invalid-*.xml must fail both, the others pass both), on a table of attribute
 * values and on softaffd's <softaffd> child, bar the differences the schema lists. */
#define G_LOG_DOMAIN "test-schema"

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <string.h>

#include "sa-metadata.h"

#ifndef SA_XML_SRCDIR
#error "SA_XML_SRCDIR must name the xml/ source directory"
#endif

static xmlRelaxNGPtr schema;

static void ignore_errors(void *user_data, xmlErrorPtr err)
{
    (void)user_data;
    g_test_message("libxml2: %s", err != NULL && err->message != NULL ? err->message : "?");
}

static void load_schema(void)
{
    g_autofree char *path = g_build_filename(SA_XML_SRCDIR, "softaff-domain.rng", NULL);
    xmlRelaxNGParserCtxtPtr pctxt = xmlRelaxNGNewParserCtxt(path);

    g_assert_nonnull(pctxt);
    xmlRelaxNGSetParserStructuredErrors(pctxt, ignore_errors, NULL);
    schema = xmlRelaxNGParse(pctxt);
    xmlRelaxNGFreeParserCtxt(pctxt);
    if (schema == NULL)
        g_error("%s does not parse as RelaxNG", path);
}

/* The schema's verdict on a document given as text. Documents that are not even well-formed
 * count as invalid. Parsed without entity substitution or network. */
static bool schema_valid(const char *xml, gsize len)
{
    xmlDocPtr doc = xmlReadMemory(xml, (int)len, "input.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (doc == NULL)
        return false;

    xmlRelaxNGValidCtxtPtr vctxt = xmlRelaxNGNewValidCtxt(schema);
    xmlRelaxNGSetValidStructuredErrors(vctxt, ignore_errors, NULL);
    int rc = xmlRelaxNGValidateDoc(vctxt, doc);
    xmlRelaxNGFreeValidCtxt(vctxt);
    xmlFreeDoc(doc);
    g_assert_cmpint(rc, >=, 0);
    return rc == 0;
}

static bool parser_valid(const char *xml, gsize len)
{
    g_autoptr(GError) error = NULL;
    SaMetadata md;
    bool ok = sa_metadata_parse(xml, len, &md, &error);

    if (!ok)
        g_test_message("parser: %s", error->message);
    return ok;
}

static void test_examples(void)
{
    g_autofree char *dir_path = g_build_filename(SA_XML_SRCDIR, "examples", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, &error);
    guint n_valid = 0;
    guint n_invalid = 0;
    const char *name;

    g_assert_no_error(error);
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (!g_str_has_suffix(name, ".xml"))
            continue;

        g_autofree char *path = g_build_filename(dir_path, name, NULL);
        g_autofree char *xml = NULL;
        gsize len = 0;
        g_assert_true(g_file_get_contents(path, &xml, &len, &error));
        g_assert_no_error(error);

        bool expect = !g_str_has_prefix(name, "invalid-");
        bool by_schema = schema_valid(xml, len);
        bool by_parser = parser_valid(xml, len);
        g_test_message("%s: expected %s, schema %s, parser %s", name, expect ? "valid" : "invalid",
                       by_schema ? "valid" : "invalid", by_parser ? "valid" : "invalid");
        if (by_schema != expect || by_parser != expect)
            g_error("%s: expected %s, the schema says %s, the parser says %s", name,
                    expect ? "valid" : "invalid", by_schema ? "valid" : "invalid",
                    by_parser ? "valid" : "invalid");
        if (expect)
            n_valid++;
        else
            n_invalid++;
    }
    /* The directory really holds examples of both kinds. */
    g_assert_cmpuint(n_valid, >=, 4);
    g_assert_cmpuint(n_invalid, >=, 2);
}

/* Attribute values on the edges of what is allowed: both must give the same verdict. */
static void test_agreement(void)
{
    static const char *const attrs[] = {
        "",
        "mode=\"soft\"",
        "mode=\"strict\"",
        "mode=\"off\"",
        "mode=\"Soft\"",
        "mode=\" soft\"",
        "mode=\"soft \"",
        "mode=\"\"",
        "mode=\"auto\"",
        "preferred=\"auto\"",
        "preferred=\"0\"",
        "preferred=\"1\"",
        "preferred=\"10\"",
        "preferred=\"2147483647\"",
        "preferred=\"2147483648\"",
        "preferred=\"99999999999999999999\"",
        "preferred=\"-1\"",
        "preferred=\"+1\"",
        "preferred=\"01\"",
        "preferred=\" 1\"",
        "preferred=\"1 \"",
        "preferred=\"&#10;1\"",
        "preferred=\"1.0\"",
        "preferred=\"1e2\"",
        "preferred=\"\"",
        "preferred=\"Auto\"",
        "softness=\"0\"",
        "softness=\"50\"",
        "softness=\"100\"",
        "softness=\"101\"",
        "softness=\"150\"",
        "softness=\"-0\"",
        "softness=\"00\"",
        "softness=\"auto\"",
        "softness=\"\"",
        "assigned=\"0\"",
        "assigned=\"3\"",
        "assigned=\"auto\"",
        "assigned=\"-3\"",
        "mode=\"strict\" preferred=\"2\" softness=\"10\" assigned=\"2\"",
        "unknown=\"1\"",
        "softaff:mode=\"soft\"",
        "xml:lang=\"en\"",
    };
    static const char *const wrappers[] = {
        "<softaff:affinity xmlns:softaff=\"" SA_METADATA_NS "\" ",
        "<affinity xmlns=\"" SA_METADATA_NS "\" ",
        "<affinity xmlns:softaff=\"" SA_METADATA_NS "\" ",
    };

    for (gsize w = 0; w < G_N_ELEMENTS(wrappers); w++) {
        for (gsize i = 0; i < G_N_ELEMENTS(attrs); i++) {
            if (w == 1 && strstr(attrs[i], "softaff:") != NULL)
                continue; /* the prefix is not declared in this wrapper */
            g_autofree char *xml = g_strconcat(wrappers[w], attrs[i], "/>", NULL);
            bool by_schema = schema_valid(xml, strlen(xml));
            bool by_parser = parser_valid(xml, strlen(xml));
            g_test_message("%s: schema %d parser %d", xml, by_schema, by_parser);
            if (by_schema != by_parser)
                g_error("%s: the schema says %s, the parser says %s", xml,
                        by_schema ? "valid" : "invalid", by_parser ? "valid" : "invalid");
        }
    }

    /* Element-level cases. */
    static const char *const docs[] = {
        "<affinity xmlns=\"urn:softaff:domain:2\"/>",
        "<affinity/>",
        "<affinity mode=\"strict\" preferred=\"1\" softness=\"50\"/>",
        "<affinity xmlns=\"urn:other\"/>",
        "<pinning/>",
        "<affinity><affinity/></affinity>",
        "<affinity xmlns:s=\"" SA_METADATA_NS "\"><s:affinity/></affinity>",
        "<softaff:affinity xmlns:softaff=\"" SA_METADATA_NS "\">\n  </softaff:affinity>",
        "<softaff:affinity xmlns:softaff=\"" SA_METADATA_NS "\"><!-- c --></softaff:affinity>",
        "<softaff:affinity xmlns:softaff=\"" SA_METADATA_NS "\">x</softaff:affinity>",
        "<softaff:affinity xmlns:softaff=\"" SA_METADATA_NS "\"><a/></softaff:affinity>",
        "<softaff:other xmlns:softaff=\"" SA_METADATA_NS "\"/>",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(docs); i++) {
        bool by_schema = schema_valid(docs[i], strlen(docs[i]));
        bool by_parser = parser_valid(docs[i], strlen(docs[i]));
        g_test_message("%s: schema %d parser %d", docs[i], by_schema, by_parser);
        if (by_schema != by_parser)
            g_error("%s: the schema says %s, the parser says %s", docs[i],
                    by_schema ? "valid" : "invalid", by_parser ? "valid" : "invalid");
    }
}

/* Both verdicts on xml; fails when they differ. */
static void expect_agreement(const char *xml)
{
    bool by_schema = schema_valid(xml, strlen(xml));
    bool by_parser = parser_valid(xml, strlen(xml));

    g_test_message("%s: schema %d parser %d", xml, by_schema, by_parser);
    if (by_schema != by_parser)
        g_error("%s: the schema says %s, the parser says %s", xml, by_schema ? "valid" : "invalid",
                by_parser ? "valid" : "invalid");
}

/* softaffd's child: every piece of <softaffd> and <own> on the edges. */
static void test_record_agreement(void)
{
    static const char *const inner[] = {
        "<softaffd/>",
        "<softaffd assigned=\"0\" created=\"yes\"/>",
        "<softaffd created=\"no\"/>",
        "<softaffd created=\"\"/>",
        "<softaffd created=\"yes \"/>",
        "<softaffd assigned=\"-1\"/>",
        "<softaffd assigned=\"2147483648\"/>",
        "<softaffd x=\"1\"/>",
        "<softaffd/><softaffd/>",
        "<softaffd>text</softaffd>",
        "<softaffd> <!-- c --> </softaffd>",
        "<softaffd><other/></softaffd>",
        "<s:softaffd xmlns:s=\"" SA_METADATA_NS "\"><s:own vcpus=\"1\"/></s:softaffd>",
        "<s:softaffd xmlns:s=\"urn:other\"/>",
        "<softaffd><own vcpus=\"1\"/><own vcpus=\"1\"/></softaffd>",
        "<softaffd><own/></softaffd>",
        "<softaffd><own vcpus=\"0\"/></softaffd>",
        "<softaffd><own vcpus=\"16384\"/></softaffd>",
        "<softaffd><own vcpus=\"16385\"/></softaffd>",
        "<softaffd><own vcpus=\"01\"/></softaffd>",
        "<softaffd><own vcpus=\"1\" y=\"1\"/></softaffd>",
        "<softaffd><own vcpus=\"1\">x</own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"1\" cpuset=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"01\" cpuset=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"-1\" cpuset=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin cpuset=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"0\" cpuset=\"0\" z=\"1\"/></own>"
        "</softaffd>",
        "<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"0\" cpuset=\"0\"><a/></vcpupin></own>"
        "</softaffd>",
        "<softaffd><own vcpus=\"2\"><emulatorpin cpuset=\"1\"/><vcpupin vcpu=\"0\" "
        "cpuset=\"0\"/><iothreadpin iothread=\"1\" cpuset=\"1\"/><vcpupin vcpu=\"1\" "
        "cpuset=\"0\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><emulatorpin cpuset=\"1\"/><emulatorpin cpuset=\"1\"/>"
        "</own></softaffd>",
        "<softaffd><own vcpus=\"2\"><emulatorpin/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"0\" cpuset=\"1\"/></own>"
        "</softaffd>",
        "<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"4294967295\" cpuset=\"1\"/>"
        "</own></softaffd>",
        "<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"4294967296\" cpuset=\"1\"/>"
        "</own></softaffd>",
        "<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"1\"/></own></softaffd>",
        "<softaffd><own vcpus=\"2\"><cachetune/></own></softaffd>",
    };
    static const char *const cpusets[] = {
        "0",    "0-7", "0-7,^3", " 1 , 2 ", "1,3-5,^4", "01", "",    " ",   ",",   "1,",   ",1",
        "1,,2", "1-",  "-1",     "^",       "^1-3",     "a",  "1 2", "0x1", "1;2", "8191",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(inner); i++) {
        g_autofree char *xml = g_strdup_printf("<affinity>%s</affinity>", inner[i]);
        expect_agreement(xml);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(cpusets); i++) {
        g_autofree char *own = g_strdup_printf(
            "<affinity><softaffd><own vcpus=\"1\" cpuset=\"%s\"/></softaffd></affinity>",
            cpusets[i]);
        g_autofree char *pin = g_strdup_printf("<affinity><softaffd><own vcpus=\"1\"><vcpupin "
                                               "vcpu=\"0\" cpuset=\"%s\"/></own></softaffd>"
                                               "</affinity>",
                                               cpusets[i]);
        expect_agreement(own);
        expect_agreement(pin);
    }
}

/* What RelaxNG cannot say (xml/softaff-domain.rng lists it): the schema takes these, the
 * parser does not; and "^N-N", the other way round. A change on either side shows here. */
static void test_record_known_differences(void)
{
    static const char *const parser_only_refuses[] = {
        "<own vcpus=\"2\"><vcpupin vcpu=\"2\" cpuset=\"0\"/></own>",
        "<own vcpus=\"2\"><vcpupin vcpu=\"0\" cpuset=\"0\"/><vcpupin vcpu=\"0\" "
        "cpuset=\"1\"/></own>",
        "<own vcpus=\"2\"><iothreadpin iothread=\"1\" cpuset=\"0\"/><iothreadpin "
        "iothread=\"1\" cpuset=\"1\"/></own>",
        "<own vcpus=\"1\" cpuset=\"8192\"/>",
        "<own vcpus=\"1\" cpuset=\"3-1\"/>",
        "<own vcpus=\"1\" cpuset=\"1,^1\"/>",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(parser_only_refuses); i++) {
        g_autofree char *xml =
            g_strdup_printf("<affinity><softaffd>%s</softaffd></affinity>", parser_only_refuses[i]);
        g_test_message("%s", xml);
        g_assert_true(schema_valid(xml, strlen(xml)));
        g_assert_false(parser_valid(xml, strlen(xml)));
    }
    const char *range_removed =
        "<affinity><softaffd><own vcpus=\"1\" cpuset=\"0-3,^2-2\"/></softaffd></affinity>";
    g_assert_false(schema_valid(range_removed, strlen(range_removed)));
    g_assert_true(parser_valid(range_removed, strlen(range_removed)));
}

/* What sa_metadata_format writes, with libvirt's namespace added, is valid by the schema. */
static void test_format_is_valid(void)
{
    SaMetadata md;

    sa_metadata_init(&md);
    md.mode = SA_MODE_STRICT;
    md.preferred = 4;
    md.softness = 100;
    md.assigned = 4;
    g_autofree char *text = sa_metadata_format(&md);
    g_autofree char *xml =
        g_strdup_printf("<affinity xmlns=\"" SA_METADATA_NS "\"%s", text + strlen("<affinity"));
    g_assert_true(schema_valid(xml, strlen(xml)));

    /* And what sa_metadata_format_full writes, with a full record. */
    SaMetadataRecord rec = {.created = true, .own = sa_own_pins_new()};
    g_autoptr(SaCpuSet) set = sa_cpuset_new();
    sa_cpuset_add_range(set, 2, 5);
    rec.own->n_vcpus = 3;
    rec.own->vcpu_cpuset = sa_cpuset_copy(set);
    rec.own->emulatorpin = sa_cpuset_copy(set);
    sa_own_pins_set_vcpu(rec.own, 2, set);
    sa_own_pins_set_iothread(rec.own, 9, set);
    g_autofree char *full = sa_metadata_format_full(&md, SA_METADATA_HAS_SOFTNESS, &rec);
    g_autofree char *full_ns =
        g_strdup_printf("<affinity xmlns=\"" SA_METADATA_NS "\"%s", full + strlen("<affinity"));
    g_test_message("%s", full_ns);
    g_assert_true(schema_valid(full_ns, strlen(full_ns)));
    g_assert_true(schema_valid(full, strlen(full)));
    sa_metadata_record_clear(&rec);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    xmlInitParser();
    load_schema();

    g_test_add_func("/schema/examples", test_examples);
    g_test_add_func("/schema/agreement", test_agreement);
    g_test_add_func("/schema/record-agreement", test_record_agreement);
    g_test_add_func("/schema/record-known-differences", test_record_known_differences);
    g_test_add_func("/schema/format-is-valid", test_format_is_valid);

    int rc = g_test_run();
    xmlRelaxNGFree(schema);
    return rc;
}
