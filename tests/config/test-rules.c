/* softaff — tests of which [rule NAME] applies (config/rules.c), on rules built by hand. */
#define G_LOG_DOMAIN "test-rules"

#include "sa-config.h"

/* A rule with the given match_* keys (NULL: the key is not set) and no settings. */
static SaRule *rule_new(const char *name, const char *match_name, const char *flavor,
                        const char *title, const char *description)
{
    SaRule *r = g_new0(SaRule, 1);
    r->name = g_strdup(name);
    r->file = g_strdup("/etc/softaff/softaff.conf");
    r->match_name = g_strdup(match_name);
    r->match_flavor = g_strdup(flavor);
    r->match_title = g_strdup(title);
    r->match_description = g_strdup(description);
    r->preferred = -2;
    r->softness = -1;
    return r;
}

static void rule_free(gpointer p)
{
    SaRule *r = p;
    g_free(r->name);
    g_free(r->file);
    g_free(r->match_name);
    g_free(r->match_flavor);
    g_free(r->match_title);
    g_free(r->match_description);
    g_free(r);
}

/* The name of the rule that matches, "" for none. */
static const char *matched(const GPtrArray *rules, const char *name, const char *flavor,
                           const char *title, const char *description)
{
    SaConfig cfg = {.rules = (GPtrArray *)rules};
    const SaRuleSubject subject = {name, flavor, title, description};
    const SaRule *r = sa_config_match_rule(&cfg, &subject);
    return r ? r->name : "";
}

static void test_no_rules(void)
{
    SaConfig cfg = {0};
    const SaRuleSubject subject = {"vm", "m1.large", "t", "d"};
    g_assert_null(sa_config_match_rule(&cfg, &subject));
    g_autoptr(GPtrArray) empty = g_ptr_array_new();
    g_assert_cmpstr(matched(empty, "vm", "m1.large", "t", "d"), ==, "");
}

/* Several rules match: the first in file order wins, whatever the others are. */
static void test_first_wins(void)
{
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func(rule_free);
    g_ptr_array_add(rules, rule_new("small", NULL, "m1.small", NULL, NULL));
    g_ptr_array_add(rules, rule_new("m1", NULL, "m1.*", NULL, NULL));
    g_ptr_array_add(rules, rule_new("any-m", NULL, "m*", NULL, NULL));
    g_assert_cmpstr(matched(rules, "vm", "m1.small", NULL, NULL), ==, "small");
    g_assert_cmpstr(matched(rules, "vm", "m1.large", NULL, NULL), ==, "m1");
    g_assert_cmpstr(matched(rules, "vm", "m2.large", NULL, NULL), ==, "any-m");
    g_assert_cmpstr(matched(rules, "vm", "c1.large", NULL, NULL), ==, "");
}

/* Each key alone; a key that is set needs the value (a VM without a flavor is not m1.*). */
static void test_each_key(void)
{
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func(rule_free);
    g_ptr_array_add(rules, rule_new("by-name", "web-*", NULL, NULL, NULL));
    g_ptr_array_add(rules, rule_new("by-flavor", NULL, "m1.*", NULL, NULL));
    g_ptr_array_add(rules, rule_new("by-title", NULL, NULL, "Database*", NULL));
    g_ptr_array_add(rules, rule_new("by-description", NULL, NULL, NULL, "*tier: gold*"));
    g_assert_cmpstr(matched(rules, "web-1", NULL, NULL, NULL), ==, "by-name");
    g_assert_cmpstr(matched(rules, "db-1", "m1.large", NULL, NULL), ==, "by-flavor");
    g_assert_cmpstr(matched(rules, "db-1", NULL, "Database primary", NULL), ==, "by-title");
    g_assert_cmpstr(matched(rules, "db-1", NULL, "database primary", NULL), ==, "");
    /* Without flags '*' spans newlines and slashes alike. */
    g_assert_cmpstr(matched(rules, "db-1", NULL, NULL, "owner: a/b\ntier: gold\n"), ==,
                    "by-description");
    g_assert_cmpstr(matched(rules, "db-1", NULL, NULL, NULL), ==, "");
    g_assert_cmpstr(matched(rules, NULL, NULL, NULL, NULL), ==, "");
}

/* Every key the rule has must match. */
static void test_all_keys(void)
{
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func(rule_free);
    g_ptr_array_add(rules, rule_new("web-large", "web-*", "m1.large", "*", NULL));
    g_assert_cmpstr(matched(rules, "web-1", "m1.large", "Web", NULL), ==, "web-large");
    g_assert_cmpstr(matched(rules, "web-1", "m1.large", NULL, NULL), ==, "");
    g_assert_cmpstr(matched(rules, "web-1", "m1.small", "Web", NULL), ==, "");
    g_assert_cmpstr(matched(rules, "db-1", "m1.large", "Web", NULL), ==, "");
}

/* Shell globs as fnmatch reads them without flags: classes, '?', escapes, a leading dot. */
static void test_globs(void)
{
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func(rule_free);
    g_ptr_array_add(rules, rule_new("literal-star", NULL, "gold\\*", NULL, NULL));
    g_ptr_array_add(rules, rule_new("class", NULL, "m[12].?large", NULL, NULL));
    g_ptr_array_add(rules, rule_new("star", NULL, "*", NULL, NULL));
    g_assert_cmpstr(matched(rules, "vm", "gold*", NULL, NULL), ==, "literal-star");
    g_assert_cmpstr(matched(rules, "vm", "m2.xlarge", NULL, NULL), ==, "class");
    g_assert_cmpstr(matched(rules, "vm", "m2.large", NULL, NULL), ==, "star"); /* ? is one */
    g_assert_cmpstr(matched(rules, "vm", "m3.large", NULL, NULL), ==, "star");
    g_assert_cmpstr(matched(rules, "vm", ".hidden", NULL, NULL), ==, "star");
    g_assert_cmpstr(matched(rules, "vm", "", NULL, NULL), ==, "star");
    g_assert_cmpstr(matched(rules, "vm", NULL, NULL, NULL), ==, "");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rules/none", test_no_rules);
    g_test_add_func("/rules/first-wins", test_first_wins);
    g_test_add_func("/rules/each-key", test_each_key);
    g_test_add_func("/rules/all-keys", test_all_keys);
    g_test_add_func("/rules/globs", test_globs);
    return g_test_run();
}
