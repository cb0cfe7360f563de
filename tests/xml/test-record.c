/* softaff — tests of softaffd's record in the metadata element: <softaffd> and <own>, parsed
 * and formatted (sa_metadata_parse_full, sa_metadata_format_full), and SaOwnPins. */
#define G_LOG_DOMAIN "test-record"

#include <string.h>

#include "sa-error.h"
#include "sa-metadata.h"

#define NS "xmlns:softaff=\"" SA_METADATA_NS "\""

static void assert_set(const SaCpuSet *set, const char *expected)
{
    g_assert_nonnull(set);
    g_autofree char *text = sa_cpuset_format(set);
    g_assert_cmpstr(text, ==, expected);
}

static SaCpuSet *set_of(const char *text)
{
    g_autoptr(GError) error = NULL;
    SaCpuSet *set = sa_cpuset_parse(text, &error);
    g_assert_no_error(error);
    return set;
}

/* Parses xml with the record; expects success. */
static void parse_ok(const char *xml, SaMetadata *md, SaMetadataRecord *rec, guint *attrs)
{
    g_autoptr(GError) error = NULL;

    if (!sa_metadata_parse_full(xml, strlen(xml), md, rec, attrs, &error))
        g_error("expected %s to parse, got: %s", xml, error->message);
}

/* The documented example, bare as libvirt returns it. */
static void test_parse_documented(void)
{
    SaMetadata md;
    SaMetadataRecord rec = {0};
    guint attrs = 0xff;

    parse_ok("<affinity mode=\"soft\" preferred=\"auto\" softness=\"50\">\n"
             "  <softaffd assigned=\"1\" created=\"yes\">\n"
             "    <own vcpus=\"2\" cpuset=\"0-7\">\n"
             "      <vcpupin vcpu=\"0\" cpuset=\"1\"/>\n"
             "      <emulatorpin cpuset=\"0-1\"/>\n"
             "      <iothreadpin iothread=\"1\" cpuset=\"0\"/>\n"
             "    </own>\n"
             "  </softaffd>\n"
             "</affinity>",
             &md, &rec, &attrs);
    g_assert_cmpint(md.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(md.preferred, ==, -1);
    g_assert_cmpint(md.softness, ==, 50);
    g_assert_cmpint(md.assigned, ==, 1);
    g_assert_cmpuint(attrs, ==,
                     SA_METADATA_HAS_MODE | SA_METADATA_HAS_PREFERRED | SA_METADATA_HAS_SOFTNESS);
    g_assert_true(rec.created);
    g_assert_nonnull(rec.own);
    g_assert_cmpuint(rec.own->n_vcpus, ==, 2);
    assert_set(rec.own->vcpu_cpuset, "0-7");
    g_assert_cmpuint(rec.own->vcpupin->len, ==, 1);
    assert_set(g_ptr_array_index(rec.own->vcpupin, 0), "1");
    assert_set(rec.own->emulatorpin, "0-1");
    g_assert_cmpuint(rec.own->iothread_ids->len, ==, 1);
    g_assert_cmpuint(g_array_index(rec.own->iothread_ids, guint, 0), ==, 1);
    assert_set(sa_own_pins_iothread(rec.own, 1), "0");
    g_assert_null(sa_own_pins_iothread(rec.own, 2));

    /* The old entry point reads the same element, the record aside. */
    SaMetadata plain;
    g_autoptr(GError) error = NULL;
    g_assert_true(sa_metadata_parse("<affinity softness=\"5\"><softaffd assigned=\"3\"/>"
                                    "</affinity>",
                                    strlen("<affinity softness=\"5\"><softaffd assigned=\"3\"/>"
                                           "</affinity>"),
                                    &plain, &error));
    g_assert_cmpint(plain.softness, ==, 5);
    g_assert_cmpint(plain.assigned, ==, 3);

    /* A second parse clears what the first left. */
    parse_ok("<affinity/>", &md, &rec, &attrs);
    g_assert_false(rec.created);
    g_assert_null(rec.own);
    g_assert_cmpuint(attrs, ==, 0);
    g_assert_cmpint(md.assigned, ==, -1);
}

/* Namespaced (as in a domain XML) with bare or prefixed children; sparse vCPU pins; the legacy
 * assigned= on <affinity>, which <softaffd assigned> overrides. */
static void test_parse_forms(void)
{
    SaMetadata md;
    SaMetadataRecord rec = {0};
    guint attrs = 0;

    parse_ok("<softaff:affinity " NS " assigned=\"4\"><softaff:softaffd>"
             "<softaff:own vcpus=\"4\"><vcpupin vcpu=\"3\" cpuset=\"0-7,^3\"/>"
             "<!-- c --><vcpupin vcpu=\"1\" cpuset=\" 2 , 5-6 \"/></softaff:own>"
             "</softaff:softaffd></softaff:affinity>",
             &md, &rec, &attrs);
    g_assert_cmpint(md.assigned, ==, 4); /* legacy */
    g_assert_cmpuint(attrs, ==, 0);
    g_assert_false(rec.created);
    g_assert_null(rec.own->vcpu_cpuset);
    g_assert_null(rec.own->emulatorpin);
    g_assert_null(rec.own->iothread_ids);
    g_assert_cmpuint(rec.own->vcpupin->len, ==, 4);
    g_assert_null(g_ptr_array_index(rec.own->vcpupin, 0));
    assert_set(g_ptr_array_index(rec.own->vcpupin, 1), "2,5-6");
    g_assert_null(g_ptr_array_index(rec.own->vcpupin, 2));
    assert_set(g_ptr_array_index(rec.own->vcpupin, 3), "0-2,4-7");

    parse_ok("<affinity xmlns=\"" SA_METADATA_NS "\" assigned=\"4\" mode=\"off\">"
             "<softaffd assigned=\"0\"/></affinity>",
             &md, &rec, &attrs);
    g_assert_cmpint(md.assigned, ==, 0);
    g_assert_cmpint(md.mode, ==, SA_MODE_OFF);
    g_assert_cmpuint(attrs, ==, SA_METADATA_HAS_MODE);
    g_assert_null(rec.own);

    /* No pin at all: recorded as "none". */
    parse_ok("<affinity><softaffd created=\"yes\"><own vcpus=\"16384\"/></softaffd></affinity>",
             &md, &rec, &attrs);
    g_assert_true(rec.created);
    g_assert_cmpuint(rec.own->n_vcpus, ==, 16384);
    g_assert_null(rec.own->vcpupin);
    sa_metadata_record_clear(&rec);
    g_assert_null(rec.own);
}

static void test_parse_errors(void)
{
    static const struct {
        const char *inner; /* inside <affinity> */
        const char *message;
    } cases[] = {
        {"<softaffd/><softaffd/>", "unexpected element <softaffd> inside <affinity> (allowed: "
                                   "<softaffd>, at most once)"},
        {"<record/>", "unexpected element <record> inside <affinity>"},
        {"<x:softaffd xmlns:x=\"urn:other\"/>",
         "unexpected element <softaffd> in namespace urn:other inside <affinity>"},
        {"<softaffd assigned=\"auto\"/>", "<softaffd> assigned=\"auto\" is not a plain decimal "
                                          "number (allowed: 0-2147483647; no sign"},
        {"<softaffd assigned=\"2147483648\"/>", "<softaffd> assigned=\"2147483648\" is out of "
                                                "range"},
        {"<softaffd created=\"no\"/>", "<softaffd> created=\"no\" is not valid (allowed: yes; "
                                       "left out: no)"},
        {"<softaffd created=\"Yes\"/>", "created=\"Yes\" is not valid"},
        {"<softaffd home=\"1\"/>",
         "unknown attribute \"home\" on <softaffd> (allowed: assigned, created)"},
        {"<softaffd xmlns:s=\"" SA_METADATA_NS "\" s:assigned=\"1\"/>",
         "attribute \"assigned\" in namespace " SA_METADATA_NS " on <softaffd> is not known"},
        {"<softaffd>x</softaffd>", "unexpected text \"x\" inside <softaffd>"},
        /* A record read before a bad sibling is freed (found by fuzz-metadata under ASan). */
        {"<softaffd><own vcpus=\"2\" cpuset=\"0-3\"><emulatorpin cpuset=\"0\"/></own>"
         "</softaffd>nn",
         "unexpected text \"nn\" inside <affinity>"},
        {"<softaffd><own vcpus=\"1\"/><own vcpus=\"1\"/></softaffd>",
         "unexpected element <own> inside <softaffd> (allowed: <own>, at most once)"},
        {"<softaffd><pins/></softaffd>", "unexpected element <pins> inside <softaffd>"},
        {"<softaffd><own/></softaffd>", "<own> needs a vcpus attribute"},
        {"<softaffd><own vcpus=\"0\"/></softaffd>",
         "<own> vcpus=\"0\" is out of range (allowed: 1-16384)"},
        {"<softaffd><own vcpus=\"16385\"/></softaffd>", "vcpus=\"16385\" is out of range"},
        {"<softaffd><own vcpus=\"02\"/></softaffd>", "vcpus=\"02\" is not a plain decimal"},
        {"<softaffd><own vcpus=\"2\" cpuset=\"\"/></softaffd>", "<own> cpuset \"\" names no CPU"},
        {"<softaffd><own vcpus=\"2\" cpuset=\"1,^1\"/></softaffd>",
         "<own> cpuset \"1,^1\" names no CPU"},
        {"<softaffd><own vcpus=\"2\" cpuset=\"3-1\"/></softaffd>",
         "<own> cpuset \"3-1\" is not a cpuset"},
        {"<softaffd><own vcpus=\"2\" cpuset=\"8192\"/></softaffd>",
         "<own> cpuset \"8192\" is not a cpuset"},
        {"<softaffd><own vcpus=\"2\" n=\"1\"/></softaffd>",
         "unknown attribute \"n\" on <own> (allowed: vcpus, cpuset)"},
        {"<softaffd><own vcpus=\"2\">1</own></softaffd>", "unexpected text \"1\" inside <own>"},
        {"<softaffd><own vcpus=\"2\"><cachetune/></own></softaffd>",
         "unexpected element <cachetune> inside <own> (allowed: <vcpupin>, <emulatorpin>, "
         "<iothreadpin>)"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"2\" cpuset=\"1\"/></own></softaffd>",
         "<vcpupin> vcpu=\"2\" is out of range (allowed: 0-1)"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"0\"/></own></softaffd>",
         "<vcpupin> needs both vcpu and cpuset attributes"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"0\" cpuset=\"x\"/></own></softaffd>",
         "<vcpupin vcpu=\"0\"> cpuset \"x\" is not a cpuset"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"1\" cpuset=\"1\"/>"
         "<vcpupin vcpu=\"1\" cpuset=\"2\"/></own></softaffd>",
         "more than one <vcpupin> for vcpu 1 in <own>"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"1\" cpuset=\"1\" x=\"1\"/></own>"
         "</softaffd>",
         "unknown attribute \"x\" on <vcpupin> (allowed: vcpu, cpuset)"},
        {"<softaffd><own vcpus=\"2\"><vcpupin vcpu=\"1\" cpuset=\"1\"><a/></vcpupin></own>"
         "</softaffd>",
         "unexpected element <a> inside <vcpupin> (allowed: nothing, the element is empty)"},
        {"<softaffd><own vcpus=\"2\"><emulatorpin/></own></softaffd>",
         "<emulatorpin> needs a cpuset attribute"},
        {"<softaffd><own vcpus=\"2\"><emulatorpin cpuset=\"1\"/><emulatorpin cpuset=\"1\"/>"
         "</own></softaffd>",
         "more than one <emulatorpin> in <own>"},
        {"<softaffd><own vcpus=\"2\"><emulatorpin cpuset=\"-1\"/></own></softaffd>",
         "<emulatorpin> cpuset \"-1\" is not a cpuset"},
        {"<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"0\" cpuset=\"1\"/></own>"
         "</softaffd>",
         "<iothreadpin> iothread=\"0\" is out of range (allowed: 1-4294967295)"},
        {"<softaffd><own vcpus=\"2\"><iothreadpin iothread=\"3\" cpuset=\"1\"/>"
         "<iothreadpin iothread=\"3\" cpuset=\"2\"/></own></softaffd>",
         "more than one <iothreadpin> for iothread 3 in <own>"},
        {"<softaffd><own vcpus=\"2\"><iothreadpin cpuset=\"2\"/></own></softaffd>",
         "<iothreadpin> needs both iothread and cpuset attributes"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf("<affinity>%s</affinity>", cases[i].inner);
        g_autoptr(GError) error = NULL;
        SaMetadata md;
        SaMetadataRecord rec = {.created = true};
        guint attrs = 0;

        sa_metadata_init(&md);
        md.softness = 77;
        g_test_message("case %s", cases[i].inner);
        g_assert_false(sa_metadata_parse_full(xml, strlen(xml), &md, &rec, &attrs, &error));
        g_assert_nonnull(error);
        g_test_message("-> %s", error->message);
        g_assert_true(g_str_has_prefix(error->message, "softaff metadata: "));
        if (strstr(error->message, cases[i].message) == NULL)
            g_error("error \"%s\" does not contain \"%s\"", error->message, cases[i].message);
        /* Nothing half-read is left: md alone, rec cleared. */
        g_assert_cmpint(md.softness, ==, 77);
        g_assert_false(rec.created);
        g_assert_null(rec.own);
    }
}

/* A record with every kind of pin. */
static SaOwnPins *full_pins(void)
{
    SaOwnPins *own = sa_own_pins_new();
    g_autoptr(SaCpuSet) a = set_of("1");
    g_autoptr(SaCpuSet) b = set_of("0-1");
    g_autoptr(SaCpuSet) c = set_of("0,4-5");

    own->n_vcpus = 4;
    own->vcpu_cpuset = set_of("0-7");
    sa_own_pins_set_vcpu(own, 0, a);
    sa_own_pins_set_vcpu(own, 2, c);
    own->emulatorpin = sa_cpuset_copy(b);
    sa_own_pins_set_iothread(own, 5, c);
    sa_own_pins_set_iothread(own, 1, a);
    return own;
}

static void test_format(void)
{
    SaMetadata md;
    SaMetadataRecord rec = {.created = true, .own = full_pins()};

    sa_metadata_init(&md);
    g_autofree char *none = sa_metadata_format_full(&md, 0, NULL);
    g_assert_cmpstr(none, ==, "<affinity/>");

    md.assigned = 3;
    g_autofree char *assigned = sa_metadata_format_full(&md, 0, NULL);
    g_assert_cmpstr(assigned, ==, "<affinity><softaffd assigned=\"3\"/></affinity>");

    md.softness = 50;
    g_autofree char *full = sa_metadata_format_full(
        &md, SA_METADATA_HAS_MODE | SA_METADATA_HAS_PREFERRED | SA_METADATA_HAS_SOFTNESS, &rec);
    g_assert_cmpstr(full, ==,
                    "<affinity mode=\"soft\" preferred=\"auto\" softness=\"50\">"
                    "<softaffd assigned=\"3\" created=\"yes\"><own vcpus=\"4\" cpuset=\"0-7\">"
                    "<vcpupin vcpu=\"0\" cpuset=\"1\"/><vcpupin vcpu=\"2\" cpuset=\"0,4-5\"/>"
                    "<emulatorpin cpuset=\"0-1\"/><iothreadpin iothread=\"5\" cpuset=\"0,4-5\"/>"
                    "<iothreadpin iothread=\"1\" cpuset=\"1\"/></own></softaffd></affinity>");

    /* Only the attributes named are written; an own without pins is empty. */
    SaMetadataRecord bare = {.own = sa_own_pins_new()};
    bare.own->n_vcpus = 1;
    md.assigned = -1;
    md.preferred = 2;
    g_autofree char *some = sa_metadata_format_full(&md, SA_METADATA_HAS_PREFERRED, &bare);
    g_assert_cmpstr(some, ==,
                    "<affinity preferred=\"2\"><softaffd><own vcpus=\"1\"/></softaffd></affinity>");
    sa_metadata_record_clear(&bare);
    sa_metadata_record_clear(&rec);
}

/* What format_full writes parses back to the same, bare or in the namespace libvirt adds. */
static void check_round_trip(const SaMetadata *md, guint attrs, const SaMetadataRecord *rec)
{
    g_autofree char *text = sa_metadata_format_full(md, attrs, rec);
    g_autofree char *in_ns =
        g_strdup_printf("<affinity xmlns=\"" SA_METADATA_NS "\"%s", text + strlen("<affinity"));
    const char *forms[] = {text, in_ns};

    for (gsize f = 0; f < G_N_ELEMENTS(forms); f++) {
        SaMetadata md2;
        SaMetadataRecord rec2 = {0};
        guint attrs2 = 0;
        parse_ok(forms[f], &md2, &rec2, &attrs2);
        g_assert_cmpmem(md, sizeof(*md), &md2, sizeof(md2));
        g_assert_cmpuint(attrs, ==, attrs2);
        g_assert_cmpint(rec != NULL && rec->created, ==, rec2.created);
        g_assert_true(sa_own_pins_equal(rec != NULL ? rec->own : NULL, rec2.own));
        sa_metadata_record_clear(&rec2);
    }
}

static void test_round_trip(void)
{
    SaMetadata md;
    SaMetadataRecord rec = {.own = full_pins()};

    sa_metadata_init(&md);
    for (guint attrs = 0; attrs < 8; attrs++) {
        md.softness = (attrs & SA_METADATA_HAS_SOFTNESS) ? 10 : -1;
        md.preferred = (attrs & SA_METADATA_HAS_PREFERRED) ? 1 : -1;
        md.mode = (attrs & SA_METADATA_HAS_MODE) ? SA_MODE_STRICT : SA_MODE_SOFT;
        for (int assigned = -1; assigned <= 0; assigned++) {
            md.assigned = assigned;
            rec.created = assigned == 0;
            check_round_trip(&md, attrs, NULL);
            check_round_trip(&md, attrs, &rec);
        }
    }
    sa_metadata_record_clear(&rec);
}

static void test_own_pins(void)
{
    g_autoptr(SaOwnPins) a = full_pins();
    g_autoptr(SaOwnPins) b = sa_own_pins_copy(a);
    g_autoptr(SaCpuSet) one = set_of("1");
    g_autoptr(SaCpuSet) two = set_of("2");

    g_assert_true(sa_own_pins_equal(a, b));
    g_assert_true(sa_own_pins_equal(NULL, NULL));
    g_assert_false(sa_own_pins_equal(a, NULL));
    /* The copy is deep. */
    sa_cpuset_add(g_ptr_array_index(b->vcpupin, 0), 7);
    g_assert_false(sa_own_pins_equal(a, b));
    sa_own_pins_set_vcpu(b, 0, one);
    g_assert_true(sa_own_pins_equal(a, b));

    /* I/O thread pins in another order are the same record; a changed one is not. */
    sa_own_pins_set_iothread(b, 5, NULL);
    g_assert_false(sa_own_pins_equal(a, b));
    g_autoptr(SaCpuSet) c = set_of("0,4-5");
    sa_own_pins_set_iothread(b, 5, c);
    g_assert_cmpuint(g_array_index(b->iothread_ids, guint, 0), ==, 1);
    g_assert_true(sa_own_pins_equal(a, b));
    sa_own_pins_set_iothread(b, 1, two);
    g_assert_false(sa_own_pins_equal(a, b));
    assert_set(sa_own_pins_iothread(b, 1), "2");
    sa_own_pins_set_iothread(b, 1, NULL);
    sa_own_pins_set_iothread(b, 5, NULL);
    g_assert_null(b->iothread_ids);
    g_assert_null(b->iothreadpin);

    /* Removing the last vCPU pins shortens the array, then drops it; a NULL tail is no pin. */
    sa_own_pins_set_vcpu(b, 2, NULL);
    g_assert_cmpuint(b->vcpupin->len, ==, 1);
    sa_own_pins_set_vcpu(b, 0, NULL);
    g_assert_null(b->vcpupin);
    sa_own_pins_set_vcpu(b, 9, NULL); /* nothing there: no-op */
    g_assert_null(b->vcpupin);
    g_autoptr(SaOwnPins) d = sa_own_pins_new();
    g_autoptr(SaOwnPins) e = sa_own_pins_new();
    d->n_vcpus = e->n_vcpus = 3;
    sa_own_pins_set_vcpu(d, 0, one);
    sa_own_pins_set_vcpu(e, 0, one);
    g_ptr_array_set_size(e->vcpupin, 3);
    g_assert_true(sa_own_pins_equal(d, e));
    e->n_vcpus = 2;
    g_assert_false(sa_own_pins_equal(d, e));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/record/parse/documented", test_parse_documented);
    g_test_add_func("/record/parse/forms", test_parse_forms);
    g_test_add_func("/record/parse/errors", test_parse_errors);
    g_test_add_func("/record/format", test_format);
    g_test_add_func("/record/round-trip", test_round_trip);
    g_test_add_func("/record/own-pins", test_own_pins);
    return g_test_run();
}
