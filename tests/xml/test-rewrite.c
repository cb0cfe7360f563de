/* softaff — tests of sa_domain_xml_rewrite_for_host: the hook's rewrite of host-specific softaff
 * data at incoming migration and restore. */
#define G_LOG_DOMAIN "test-rewrite"

#include <string.h>

#include "sa-error.h"
#include "sa-metadata.h"

#define NS "xmlns:softaff=\"" SA_METADATA_NS "\""

/* A hand-built layout with the partition ids given (CPUs 4 per partition). */
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

/* Partitions 0 and 2: id 1 is missing. */
static SaTopology *sparse_topology(void)
{
    static const guint ids[] = {0, 2};
    return make_topology(ids, G_N_ELEMENTS(ids));
}

/* A domain XML in libxml2's own output style (double quotes), so that an untouched document
 * comes back byte for byte; %s is the softaff element (or nothing). */
#define DOMAIN_HEAD                                                                                \
    "<domain type=\"kvm\" id=\"3\">\n"                                                             \
    "  <name>mig-01</name>\n"                                                                      \
    "  <uuid>0b7f43f5-3bd3-4f37-9a0c-0e0f4bd5b6a1</uuid>\n"                                        \
    "  <description>Größe &amp; \"quotes\" &lt;ok&gt;</description>\n"                           \
    "  <metadata>\n"                                                                               \
    "    <app:info xmlns:app=\"urn:example:app\">keep me</app:info>\n"                             \
    "    "
#define DOMAIN_TAIL                                                                                \
    "\n"                                                                                           \
    "  </metadata>\n"                                                                              \
    "  <!-- a comment stays -->\n"                                                                 \
    "  <memory unit=\"KiB\">1048576</memory>\n"                                                    \
    "  <vcpu placement=\"static\" cpuset=\"0-7\">2</vcpu>\n"                                       \
    "  <cputune>\n"                                                                                \
    "    <vcpupin vcpu=\"0\" cpuset=\"0-1\"/>\n"                                                   \
    "  </cputune>\n"                                                                               \
    "  <os>\n"                                                                                     \
    "    <type arch=\"x86_64\" machine=\"pc\">hvm</type>\n"                                        \
    "  </os>\n"                                                                                    \
    "</domain>\n"

static char *domain_with(const char *element)
{
    return g_strconcat(DOMAIN_HEAD, element, DOMAIN_TAIL, NULL);
}

/* Rewrites xml for topo; expects success and returns the output (NULL = unchanged). */
static char *rewrite_ok(const char *xml, const SaTopology *topo)
{
    g_autoptr(GError) error = NULL;
    char *out = (char *)0x1;

    if (!sa_domain_xml_rewrite_for_host(xml, strlen(xml), topo, &out, &error))
        g_error("expected the rewrite to succeed, got: %s", error->message);
    g_assert_no_error(error);
    g_assert_true(out != (char *)0x1);
    return out;
}

static void rewrite_fails(const char *xml, gsize len, const SaTopology *topo, int code,
                          const char *contains)
{
    g_autoptr(GError) error = NULL;
    char *out = (char *)0x1;

    g_assert_false(sa_domain_xml_rewrite_for_host(xml, len, topo, &out, &error));
    g_assert_null(out);
    g_assert_error(error, SA_ERROR, code);
    g_test_message("%s", error->message);
    if (strstr(error->message, contains) == NULL)
        g_error("error \"%s\" does not contain \"%s\"", error->message, contains);
}

static void test_unchanged(void)
{
    SaTopology *topo = sparse_topology();
    const char *elements[] = {
        "",                           /* no softaff element */
        "<softaff:affinity " NS "/>", /* all defaults */
        "<softaff:affinity " NS " mode=\"soft\" preferred=\"auto\" softness=\"50\"/>",
        "<softaff:affinity " NS " preferred=\"0\"/>",                 /* partition 0 exists */
        "<softaff:affinity " NS " mode=\"strict\" preferred=\"2\"/>", /* partition 2 exists */
        "<other:affinity xmlns:other=\"urn:x\" assigned=\"9\"/>",     /* not ours */
    };

    for (gsize i = 0; i < G_N_ELEMENTS(elements); i++) {
        g_autofree char *xml = domain_with(elements[i]);
        g_autofree char *out = rewrite_ok(xml, topo);
        g_test_message("%s", elements[i]);
        g_assert_null(out);
    }

    /* No <metadata> at all. */
    const char *plain = "<domain><name>p</name><vcpu>1</vcpu></domain>";
    g_autofree char *out = rewrite_ok(plain, topo);
    g_assert_null(out);
    free_topology(topo);
}

static void test_drop_assigned(void)
{
    SaTopology *topo = sparse_topology();
    g_autofree char *xml =
        domain_with("<softaff:affinity " NS " mode=\"soft\" preferred=\"auto\" assigned=\"2\"/>");
    g_autofree char *expected =
        domain_with("<softaff:affinity " NS " mode=\"soft\" preferred=\"auto\"/>");

    /* assigned is dropped even when this host has that partition: the source chose it. */
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain mig-01: dropped assigned=\"2\"*source host*");
    g_autofree char *out = rewrite_ok(xml, topo);
    g_test_assert_expected_messages();
    g_assert_cmpstr(out, ==, expected);
    free_topology(topo);
}

static void test_preferred_to_auto(void)
{
    SaTopology *topo = sparse_topology();
    g_autofree char *xml =
        domain_with("<softaff:affinity " NS " preferred=\"1\" softness=\"30\" mode=\"strict\"/>");
    g_autofree char *expected = domain_with(
        "<softaff:affinity " NS " preferred=\"auto\" softness=\"30\" mode=\"strict\"/>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain mig-01: preferred=\"1\" names no partition of this host "
                          "(partitions of layout node: 0, 2): using preferred=\"auto\"");
    g_autofree char *out = rewrite_ok(xml, topo);
    g_test_assert_expected_messages();
    g_assert_cmpstr(out, ==, expected);
    free_topology(topo);
}

static void test_both(void)
{
    SaTopology *topo = sparse_topology();
    /* Another prefix and a default namespace: matched by URI. */
    g_autofree char *xml =
        domain_with("<affinity xmlns=\"" SA_METADATA_NS "\" assigned=\"7\" preferred=\"5\"/>");
    g_autofree char *expected =
        domain_with("<affinity xmlns=\"" SA_METADATA_NS "\" preferred=\"auto\"/>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped assigned=\"7\"*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*preferred=\"5\" names no*");
    g_autofree char *out = rewrite_ok(xml, topo);
    g_test_assert_expected_messages();
    g_assert_cmpstr(out, ==, expected);

    /* The output is a valid domain XML with the rewritten element. */
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(out, strlen(out), &error);
    g_assert_no_error(error);
    g_assert_cmpstr(d->name, ==, "mig-01");
    g_assert_true(d->has_metadata);
    g_assert_null(d->metadata_error);
    g_assert_cmpint(d->metadata.preferred, ==, -1);
    g_assert_cmpint(d->metadata.assigned, ==, -1);

    /* Rewriting the output again changes nothing. */
    g_autofree char *again = rewrite_ok(out, topo);
    g_assert_null(again);
    free_topology(topo);
}

/* libvirt's own style: single quotes, a fixture file; everything but the element survives. */
static void test_fixture_file(void)
{
    g_autofree char *path =
        g_build_filename(g_getenv("SOFTAFF_TEST_DATA"), "xml", "domain-full.xml", NULL);
    g_autofree char *xml = NULL;
    gsize len = 0;
    g_autoptr(GError) error = NULL;
    static const guint ids[] = {0};
    SaTopology *topo = make_topology(ids, G_N_ELEMENTS(ids));

    g_assert_true(g_file_get_contents(path, &xml, &len, &error));
    g_assert_no_error(error);

    g_autoptr(SaDomainXml) before = sa_domain_xml_parse(xml, len, &error);
    g_assert_no_error(error);
    g_assert_cmpint(before->metadata.preferred, ==, 1);
    g_assert_cmpint(before->metadata.assigned, ==, 1);

    g_autofree char *out = NULL;
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "domain web-01: dropped*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain web-01: preferred=\"1\"*(partitions of layout node: 0)*");
    g_assert_true(sa_domain_xml_rewrite_for_host(xml, len, topo, &out, &error));
    g_test_assert_expected_messages();
    g_assert_no_error(error);
    g_assert_nonnull(out);
    g_test_message("%s", out);

    g_autoptr(SaDomainXml) after = sa_domain_xml_parse(out, strlen(out), &error);
    g_assert_no_error(error);
    g_assert_cmpstr(after->name, ==, before->name);
    g_assert_cmpstr(after->uuid, ==, before->uuid);
    g_assert_cmpuint(after->n_vcpus, ==, before->n_vcpus);
    g_assert_cmpuint(after->memory_bytes, ==, before->memory_bytes);
    g_assert_true(sa_cpuset_equal(after->vcpu_cpuset, before->vcpu_cpuset));
    g_assert_true(sa_cpuset_equal(after->emulatorpin, before->emulatorpin));
    g_assert_cmpuint(after->vcpupin->len, ==, before->vcpupin->len);
    g_assert_cmpint(after->metadata.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(after->metadata.softness, ==, 30);
    g_assert_cmpint(after->metadata.preferred, ==, -1);
    g_assert_cmpint(after->metadata.assigned, ==, -1);
    /* Elements softaff does not read are kept, other namespaces too; no XML declaration. */
    g_assert_nonnull(strstr(out, "<libosinfo:os id=\"http://debian.org/debian/12\"/>"));
    g_assert_nonnull(strstr(out, "<other:affinity xmlns:other=\"urn:example:not-softaff\" "
                                 "mode=\"bogus\"/>"));
    g_assert_nonnull(strstr(out, "<shares>1024</shares>"));
    g_assert_nonnull(strstr(out, "<emulator>/usr/bin/qemu-system-x86_64</emulator>"));
    g_assert_true(g_str_has_prefix(out, "<domain type=\"kvm\" id=\"7\">\n  <name>web-01</name>"));
    free_topology(topo);
}

/* The partitions of a fixture host (sparse NUMA node ids), as the hook loads them. */
static void test_fixture_host(void)
{
    g_autofree char *root =
        g_build_filename(g_getenv("SOFTAFF_TEST_DATA"), "sparse-8n", "sys", NULL);
    g_autoptr(GError) error = NULL;

    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    g_autoptr(SaTopology) topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpint(sa_topology_find_partition(topo, 4), <, 0);
    g_assert_cmpint(sa_topology_find_partition(topo, 8), >=, 0);

    /* Node 8 exists there: kept. */
    g_autofree char *keep = domain_with("<softaff:affinity " NS " preferred=\"8\"/>");
    g_autofree char *out = rewrite_ok(keep, topo);
    g_assert_null(out);

    /* Node 4 has no CPU, so it is no partition: auto. */
    g_autofree char *xml = domain_with("<softaff:affinity " NS " preferred=\"4\"/>");
    g_autofree char *expected = domain_with("<softaff:affinity " NS " preferred=\"auto\"/>");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "*preferred=\"4\"*(partitions of layout node: 0, 1, 2, 3, 5, 6, 8)*");
    g_autofree char *out2 = rewrite_ok(xml, topo);
    g_test_assert_expected_messages();
    g_assert_cmpstr(out2, ==, expected);
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
}

/* A domain as softaff left it running: softaff's pins on every vCPU and the emulator, an
 * <iothreadpin> and <shares> of the user's; %s is the softaff element. */
#define PINNED_HEAD                                                                                \
    "<domain type=\"kvm\">\n"                                                                      \
    "  <name>pinned</name>\n"                                                                      \
    "  <metadata>\n"                                                                               \
    "    "
#define PINNED_VCPU                                                                                \
    "\n"                                                                                           \
    "  </metadata>\n"                                                                              \
    "  <vcpu placement=\"static\" cpuset=\"4-7\">2</vcpu>\n"                                       \
    "  <iothreads>1</iothreads>\n"
#define PINNED_CPUTUNE                                                                             \
    "  <cputune>\n"                                                                                \
    "    <shares>2048</shares>\n"                                                                  \
    "    <vcpupin vcpu=\"0\" cpuset=\"4-7\"/>\n"                                                   \
    "    <vcpupin vcpu=\"1\" cpuset=\"4-7\"/>\n"                                                   \
    "    <emulatorpin cpuset=\"4-7\"/>\n"                                                          \
    "    <iothreadpin iothread=\"1\" cpuset=\"4-7\"/>\n"                                           \
    "    <period>100000</period>\n"                                                                \
    "  </cputune>\n"
#define PINNED_TAIL "</domain>\n"

static char *pinned_with(const char *element)
{
    return g_strconcat(PINNED_HEAD, element, PINNED_VCPU, PINNED_CPUTUNE, PINNED_TAIL, NULL);
}

/* Rewrites xml, expects out, and checks that the output is a domain whose pins are exactly
 * own's and that rewriting it again changes nothing. */
static void rewrite_expect(const char *xml, const char *expected, const SaOwnPins *own)
{
    SaTopology *topo = sparse_topology();
    g_autofree char *out = rewrite_ok(xml, topo);
    g_autoptr(GError) error = NULL;

    g_assert_nonnull(out);
    g_test_message("%s", out);
    g_assert_cmpstr(out, ==, expected);

    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(out, strlen(out), &error);
    g_assert_no_error(error);
    g_assert_null(d->metadata_error);
    g_assert_null(d->record.own);
    g_assert_cmpint(d->metadata.assigned, ==, -1);
    g_autoptr(SaOwnPins) now = sa_own_pins_new();
    now->n_vcpus = d->n_vcpus;
    now->vcpu_cpuset = d->vcpu_cpuset != NULL ? sa_cpuset_copy(d->vcpu_cpuset) : NULL;
    now->emulatorpin = d->emulatorpin != NULL ? sa_cpuset_copy(d->emulatorpin) : NULL;
    for (guint v = 0; d->vcpupin != NULL && v < d->vcpupin->len; v++)
        if (g_ptr_array_index(d->vcpupin, v) != NULL)
            sa_own_pins_set_vcpu(now, v, g_ptr_array_index(d->vcpupin, v));
    for (guint i = 0; d->iothread_ids != NULL && i < d->iothread_ids->len; i++)
        if (g_ptr_array_index(d->iothreadpin, i) != NULL)
            sa_own_pins_set_iothread(now, g_array_index(d->iothread_ids, guint, i),
                                     g_ptr_array_index(d->iothreadpin, i));
    g_assert_true(sa_own_pins_equal(now, own));

    g_autofree char *again = rewrite_ok(out, topo);
    g_assert_null(again);
    free_topology(topo);
}

/* The record's own, parsed from the element. */
static SaOwnPins *own_of(const char *element)
{
    g_autoptr(GError) error = NULL;
    SaMetadata md;
    SaMetadataRecord rec = {0};

    g_assert_true(sa_metadata_parse_full(element, strlen(element), &md, &rec, NULL, &error));
    g_assert_no_error(error);
    return g_steal_pointer(&rec.own);
}

#define PARTIAL_OWN                                                                                \
    "<own vcpus=\"2\" cpuset=\"0-7\"><vcpupin vcpu=\"1\" cpuset=\"3\"/>"                           \
    "<iothreadpin iothread=\"1\" cpuset=\"0\"/></own>"

/* A user pin on one vCPU and an I/O thread; softaff's pins on the rest go, <shares> and
 * <period> stay where they are. */
static void test_record_partial_pin(void)
{
    g_autofree char *xml =
        pinned_with("<softaff:affinity " NS " mode=\"soft\"><softaffd "
                    "assigned=\"0\">" PARTIAL_OWN "</softaffd></softaff:affinity>");
    g_autofree char *expected = g_strconcat(PINNED_HEAD, "<softaff:affinity " NS " mode=\"soft\"/>",
                                            "\n  </metadata>\n"
                                            "  <vcpu placement=\"static\" cpuset=\"0-7\">2</vcpu>\n"
                                            "  <iothreads>1</iothreads>\n"
                                            "  <cputune>\n"
                                            "    <shares>2048</shares>\n"
                                            "    <vcpupin vcpu=\"1\" cpuset=\"3\"/>\n"
                                            "    <iothreadpin iothread=\"1\" cpuset=\"0\"/>\n"
                                            "    <period>100000</period>\n"
                                            "  </cputune>\n",
                                            PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own = own_of("<affinity><softaffd>" PARTIAL_OWN "</softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: <vcpu cpuset> \"4-7\" restored to the VM's own \"0-7\"");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: <cputune>: 4 pin(s) replaced by the VM's own as "
                          "softaffd recorded them (vcpu 1: 3, iothread 1: 0)");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: dropped assigned=\"0\"*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: dropped softaffd's <softaffd> record*");
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();
}

/* Only an emulator pin of the user's, no <vcpu cpuset>: the attribute goes. */
static void test_record_emulatorpin(void)
{
    g_autofree char *xml = pinned_with(
        "<softaff:affinity " NS " softness=\"20\"><softaff:softaffd><softaff:own vcpus=\"2\">"
        "<softaff:emulatorpin cpuset=\"0-1\"/></softaff:own></softaff:softaffd>"
        "</softaff:affinity>");
    g_autofree char *expected =
        g_strconcat(PINNED_HEAD, "<softaff:affinity " NS " softness=\"20\"/>",
                    "\n  </metadata>\n"
                    "  <vcpu placement=\"static\">2</vcpu>\n"
                    "  <iothreads>1</iothreads>\n"
                    "  <cputune>\n"
                    "    <shares>2048</shares>\n"
                    "    <emulatorpin cpuset=\"0-1\"/>\n"
                    "    <period>100000</period>\n"
                    "  </cputune>\n",
                    PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own =
        own_of("<affinity><softaffd><own vcpus=\"2\"><emulatorpin cpuset=\"0-1\"/></own>"
               "</softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: removed <vcpu cpuset=\"4-7\"> (the VM had none*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*4 pin(s) replaced*(emulator: 0-1)");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped softaffd's*");
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();
}

/* No setting of its own, and an element softaffd created: the pins and the element go. */
static void test_record_none_created(void)
{
    g_autofree char *xml =
        pinned_with("<softaff:affinity " NS "><softaffd assigned=\"2\" created=\"yes\">"
                    "<own vcpus=\"2\"/></softaffd></softaff:affinity>");
    g_autofree char *expected = g_strconcat("<domain type=\"kvm\">\n"
                                            "  <name>pinned</name>\n"
                                            "  <metadata>\n"
                                            "  </metadata>\n"
                                            "  <vcpu placement=\"static\">2</vcpu>\n"
                                            "  <iothreads>1</iothreads>\n"
                                            "  <cputune>\n"
                                            "    <shares>2048</shares>\n"
                                            "    <period>100000</period>\n"
                                            "  </cputune>\n",
                                            PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own =
        own_of("<affinity><softaffd><own vcpus=\"2\"/></softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*removed <vcpu cpuset=\"4-7\">*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*4 pin(s) replaced*(no pin)");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped assigned=\"2\"*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped softaffd's*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: removed the softaff element softaffd created*");
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();

    /* Nothing but softaff's pins in <cputune>: it goes too. The user's own attribute-less
     * element (not created by softaffd) stays. */
    g_autofree char *only_pins = g_strconcat(
        PINNED_HEAD,
        "<softaff:affinity " NS "><softaffd><own vcpus=\"2\"/></softaffd>"
        "</softaff:affinity>",
        PINNED_VCPU,
        "  <cputune>\n    <vcpupin vcpu=\"0\" cpuset=\"4\"/>\n    <emulatorpin cpuset=\"5\"/>\n"
        "  </cputune>\n",
        PINNED_TAIL, NULL);
    g_autofree char *expected2 = g_strconcat(PINNED_HEAD, "<softaff:affinity " NS "/>",
                                             "\n  </metadata>\n"
                                             "  <vcpu placement=\"static\">2</vcpu>\n"
                                             "  <iothreads>1</iothreads>\n",
                                             PINNED_TAIL, NULL);
    rewrite_expect(only_pins, expected2, own);
}

/* A domain without <cputune>: one is made after <vcpu>, indented like it. */
static void test_record_new_cputune(void)
{
    g_autofree char *xml =
        g_strconcat(PINNED_HEAD,
                    "<softaff:affinity " NS " preferred=\"0\"><softaffd>" PARTIAL_OWN
                    "</softaffd></softaff:affinity>",
                    PINNED_VCPU, PINNED_TAIL, NULL);
    g_autofree char *expected =
        g_strconcat(PINNED_HEAD, "<softaff:affinity " NS " preferred=\"0\"/>",
                    "\n  </metadata>\n"
                    "  <vcpu placement=\"static\" cpuset=\"0-7\">2</vcpu>\n"
                    "  <cputune>\n"
                    "    <vcpupin vcpu=\"1\" cpuset=\"3\"/>\n"
                    "    <iothreadpin iothread=\"1\" cpuset=\"0\"/>\n"
                    "  </cputune>\n"
                    "  <iothreads>1</iothreads>\n",
                    PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own = own_of("<affinity><softaffd>" PARTIAL_OWN "</softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*<vcpu cpuset> \"4-7\"*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*: 0 pin(s) replaced*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped softaffd's*");
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();
}

/* The domain already holds exactly the recorded settings (written differently): only the
 * record goes. */
static void test_record_already_own(void)
{
    g_autofree char *xml =
        g_strconcat(PINNED_HEAD,
                    "<softaff:affinity " NS " mode=\"strict\"><softaffd>" PARTIAL_OWN
                    "</softaffd></softaff:affinity>",
                    "\n  </metadata>\n"
                    "  <vcpu placement=\"static\" cpuset=\"0-3,4-7\">2</vcpu>\n"
                    "  <iothreads>1</iothreads>\n"
                    "  <cputune>\n"
                    "    <iothreadpin iothread=\"1\" cpuset=\"0,^5,5\"/>\n"
                    "    <vcpupin vcpu=\"1\" cpuset=\"3\"/>\n"
                    "  </cputune>\n",
                    PINNED_TAIL, NULL);
    g_autofree char *expected =
        g_strconcat(PINNED_HEAD, "<softaff:affinity " NS " mode=\"strict\"/>",
                    "\n  </metadata>\n"
                    "  <vcpu placement=\"static\" cpuset=\"0-3,4-7\">2</vcpu>\n"
                    "  <iothreads>1</iothreads>\n"
                    "  <cputune>\n"
                    "    <iothreadpin iothread=\"1\" cpuset=\"0,^5,5\"/>\n"
                    "    <vcpupin vcpu=\"1\" cpuset=\"3\"/>\n"
                    "  </cputune>\n",
                    PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own = own_of("<affinity><softaffd>" PARTIAL_OWN "</softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: dropped softaffd's <softaffd> record*");
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();
}

/* Pins of vCPUs and I/O threads the domain no longer has are left out: libvirt would refuse
 * the whole document, and with it the restore or migration. */
static void test_record_gone_threads(void)
{
    g_autofree char *xml = pinned_with(
        "<softaff:affinity " NS " mode=\"soft\"><softaffd><own vcpus=\"4\">"
        "<vcpupin vcpu=\"1\" cpuset=\"3\"/><vcpupin vcpu=\"3\" cpuset=\"2\"/>"
        "<iothreadpin iothread=\"2\" cpuset=\"1\"/><iothreadpin iothread=\"1\" cpuset=\"0\"/>"
        "</own></softaffd></softaff:affinity>");
    g_autofree char *expected = g_strconcat(PINNED_HEAD, "<softaff:affinity " NS " mode=\"soft\"/>",
                                            "\n  </metadata>\n"
                                            "  <vcpu placement=\"static\">2</vcpu>\n"
                                            "  <iothreads>1</iothreads>\n"
                                            "  <cputune>\n"
                                            "    <shares>2048</shares>\n"
                                            "    <vcpupin vcpu=\"1\" cpuset=\"3\"/>\n"
                                            "    <iothreadpin iothread=\"1\" cpuset=\"0\"/>\n"
                                            "    <period>100000</period>\n"
                                            "  </cputune>\n",
                                            PINNED_TAIL, NULL);
    g_autoptr(SaOwnPins) own = own_of("<affinity><softaffd><own vcpus=\"4\"><vcpupin vcpu=\"1\" "
                                      "cpuset=\"3\"/><iothreadpin iothread=\"1\" cpuset=\"0\"/>"
                                      "</own></softaffd></affinity>");

    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: recorded <vcpupin vcpu=\"3\"> left out: the domain "
                          "has 2 vCPUs");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "domain pinned: recorded <iothreadpin iothread=\"2\"> left out: the "
                          "domain has no such I/O thread");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*removed <vcpu cpuset*");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE,
                          "*4 pin(s) replaced*(vcpu 1: 3, iothread 1: 0)");
    g_test_expect_message("softaff-xml", G_LOG_LEVEL_MESSAGE, "*dropped softaffd's*");
    /* rewrite_expect compares the result with own, taken with the domain's vCPU count. */
    own->n_vcpus = 2;
    rewrite_expect(xml, expected, own);
    g_test_assert_expected_messages();
}

/* An invalid record: nothing is rewritten, the error names it. */
static void test_record_invalid(void)
{
    SaTopology *topo = sparse_topology();
    g_autofree char *xml = pinned_with("<softaff:affinity " NS "><softaffd created=\"no\"/>"
                                       "</softaff:affinity>");

    rewrite_fails(xml, strlen(xml), topo, SA_ERROR_PARSE, "<softaffd> created=\"no\"");
    free_topology(topo);
}

static void test_errors(void)
{
    SaTopology *topo = sparse_topology();

    /* An invalid element is not rewritten: the error names the attribute and the value. */
    g_autofree char *bad =
        domain_with("<softaff:affinity " NS " softness=\"150\" assigned=\"1\"/>");
    rewrite_fails(bad, strlen(bad), topo, SA_ERROR_RANGE, "softness=\"150\" is out of range");

    g_autofree char *two = domain_with("<softaff:affinity " NS " assigned=\"1\"/><x:affinity "
                                       "xmlns:x=\"" SA_METADATA_NS "\"/>");
    rewrite_fails(two, strlen(two), topo, SA_ERROR_PARSE, "2 elements in namespace");

    const char *not_domain = "<network><name>n</name></network>";
    rewrite_fails(not_domain, strlen(not_domain), topo, SA_ERROR_PARSE,
                  "root element is <network>");

    const char *broken = "<domain><name>b</name>";
    rewrite_fails(broken, strlen(broken), topo, SA_ERROR_PARSE, "not well-formed");

    rewrite_fails("", 0, topo, SA_ERROR_PARSE, "empty document");

    /* The safe reader is used: no DTD, no entities. */
    const char *dtd = "<!DOCTYPE domain [<!ENTITY a \"1\">]><domain><name>&a;</name></domain>";
    rewrite_fails(dtd, strlen(dtd), topo, SA_ERROR_PARSE, "document type declarations");

    /* Not UTF-8. */
    const char latin1[] = "<domain><name>caf\xe9</name></domain>";
    rewrite_fails(latin1, sizeof(latin1) - 1, topo, SA_ERROR_PARSE, "not valid UTF-8");
    free_topology(topo);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/rewrite/unchanged", test_unchanged);
    g_test_add_func("/rewrite/drop-assigned", test_drop_assigned);
    g_test_add_func("/rewrite/preferred-to-auto", test_preferred_to_auto);
    g_test_add_func("/rewrite/both", test_both);
    g_test_add_func("/rewrite/fixture-file", test_fixture_file);
    g_test_add_func("/rewrite/fixture-host", test_fixture_host);
    g_test_add_func("/rewrite/errors", test_errors);
    g_test_add_func("/rewrite/record/partial-pin", test_record_partial_pin);
    g_test_add_func("/rewrite/record/emulatorpin", test_record_emulatorpin);
    g_test_add_func("/rewrite/record/none-created", test_record_none_created);
    g_test_add_func("/rewrite/record/new-cputune", test_record_new_cputune);
    g_test_add_func("/rewrite/record/already-own", test_record_already_own);
    g_test_add_func("/rewrite/record/gone-threads", test_record_gone_threads);
    g_test_add_func("/rewrite/record/invalid", test_record_invalid);
    return g_test_run();
}
