/* softaff — which [rule NAME] applies to a VM (see sa-config.h). */
#define G_LOG_DOMAIN "softaff-config"

#include <fnmatch.h>

#include "sa-config.h"

/* One match_* key: unset matches anything; set, it needs a value that the glob matches. */
static bool key_matches(const char *pattern, const char *value)
{
    if (pattern == NULL)
        return true;
    return value != NULL && fnmatch(pattern, value, 0) == 0;
}

static bool rule_matches(const SaRule *rule, const SaRuleSubject *subject)
{
    return key_matches(rule->match_name, subject->name) &&
           key_matches(rule->match_flavor, subject->flavor) &&
           key_matches(rule->match_title, subject->title) &&
           key_matches(rule->match_description, subject->description);
}

const SaRule *sa_config_match_rule(const SaConfig *cfg, const SaRuleSubject *subject)
{
    for (guint i = 0; cfg->rules != NULL && i < cfg->rules->len; i++) {
        const SaRule *rule = g_ptr_array_index(cfg->rules, i);
        if (rule_matches(rule, subject))
            return rule;
    }
    return NULL;
}
