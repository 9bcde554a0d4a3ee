//! The rule table: one fixed name per rule, the view it runs on and its
//! pattern.
//!
//! All patterns are compiled with Unicode mode off (`regex::bytes`, ASCII
//! `\b`, `\s`, `(?i)`): the views are already NFKC-normalised and folded to
//! ASCII, and ASCII-only automata are far smaller and faster to build, which
//! matters on a cold Worker. The `regex` engine is linear-time; nothing here
//! relies on backtracking or look-around.
//!
//! Patterns are written against collapsed whitespace (one space or one
//! newline between words), but still say `\s+` so they read naturally.

use super::FindingClass::{self, Injection, Secret, Url};

/// Which normalised form of the string a rule is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// Case kept: credential formats with case-sensitive prefixes.
    Raw,
    /// ASCII lower-cased: most injection and URL rules.
    Lower,
    /// Letters only, leetspeak undone: letter-spaced phrases.
    Squeezed,
}

/// Extra confirmation after the pattern matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    None,
    /// Some capture group must look like a real credential value (see
    /// [`super::credential::looks_like_credential`]), not a placeholder or
    /// an English word such as `token: none`.
    CredentialValue,
}

#[derive(Debug)]
pub(super) struct Rule {
    pub class: FindingClass,
    pub name: &'static str,
    pub view: View,
    pub check: Check,
    pub pattern: &'static str,
}

const fn rule(class: FindingClass, name: &'static str, view: View, pattern: &'static str) -> Rule {
    Rule {
        class,
        name,
        view,
        check: Check::None,
        pattern,
    }
}

const fn checked(class: FindingClass, name: &'static str, pattern: &'static str) -> Rule {
    Rule {
        class,
        name,
        view: View::Raw,
        check: Check::CredentialValue,
        pattern,
    }
}

use View::{Lower, Raw, Squeezed};

/// The generic URL rule, and the host-shape rules it makes redundant when both
/// match one string.
pub(super) const SCHEME_URL: &str = "scheme_url";
pub(super) const HOST_ONLY: &[&str] = &["www_host", "ip_host", "bare_domain_path"];

// Shell interpreters, as a regex fragment: sh, bash, zsh, dash, ksh, fish, tcsh, csh.
macro_rules! shells {
    () => {
        r"(?:ba|z|da|k|fi|tc|c)?sh"
    };
}

pub(super) static RULES: &[Rule] = &[
    // ---------------------------------------------------------------- secrets
    // Vendor formats: prefix plus a body long enough that prose never matches.
    rule(
        Secret,
        "aws_access_key_id",
        Raw,
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b",
    ),
    rule(
        Secret,
        "aws_secret_access_key",
        Raw,
        r#"(?i)secret_?(?:access_?)?key["']?\s*(?:=>|[:=])\s*["']?[A-Za-z0-9/+]{40}"#,
    ),
    rule(
        Secret,
        "github_token",
        Raw,
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    ),
    rule(
        Secret,
        "gitlab_token",
        Raw,
        r"\bgl(?:pat|dt|ptt|rt|soat|cbt)-[A-Za-z0-9_-]{20,}",
    ),
    rule(
        Secret,
        "slack_token",
        Raw,
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}|\bxapp-[0-9]-[A-Za-z0-9-]{10,}",
    ),
    rule(
        Secret,
        "slack_webhook",
        Raw,
        r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}",
    ),
    rule(
        Secret,
        "stripe_key",
        Raw,
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}",
    ),
    // Legacy keys are sk- plus alphanumerics only, so "sk-ant-..." (Anthropic)
    // never matches here and gets its own rule.
    rule(
        Secret,
        "openai_api_key",
        Raw,
        r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})",
    ),
    rule(
        Secret,
        "anthropic_api_key",
        Raw,
        r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    ),
    rule(
        Secret,
        "google_api_key",
        Raw,
        r"\bAIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}",
    ),
    rule(Secret, "npm_token", Raw, r"\bnpm_[A-Za-z0-9]{36}\b"),
    rule(Secret, "pypi_token", Raw, r"\bpypi-AgE[A-Za-z0-9_-]{40,}"),
    rule(Secret, "huggingface_token", Raw, r"\bhf_[A-Za-z0-9]{30,}"),
    // PEM private-key armour of any key type (RSA, EC, OPENSSH, ENCRYPTED,
    // PGP ... BLOCK) and PuTTY key files. Prose about keys lacks the dashes.
    rule(
        Secret,
        "private_key_block",
        Raw,
        r"(?i)-{3,}\s*begin\s+(?:[a-z0-9]+\s+){0,3}private\s+key|\bputty-user-key-file-[0-9]",
    ),
    // Header and payload segments of a JWT are base64url JSON objects, so both
    // usually start with "eyJ" ('{"'); an unsigned token has no third part.
    rule(
        Secret,
        "jwt",
        Raw,
        r"\beyJ[A-Za-z0-9_-]{8,}\.(?:eyJ[A-Za-z0-9_-]{8,}|[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    ),
    // user:password@ inside any scheme URL (database DSNs, git remotes).
    rule(
        Secret,
        "url_credentials",
        Raw,
        r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@",
    ),
    // `Authorization: <scheme> <value>` or a bare `Bearer <value>`.
    checked(
        Secret,
        "auth_header",
        concat!(
            r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?"#,
            r"(?:(?:bearer|basic|token|bot|digest|apikey|hmac|negotiate|ntlm|aws4-hmac-sha256)\s+)?",
            r"([A-Za-z0-9._~+/=:-]{8,})",
            r"|\bbearer\s+([A-Za-z0-9._~+/=-]{12,})",
        ),
    ),
    // `password=...`, `api_key: ...`, `"client_secret": "..."`, `TOKEN => ...`.
    // The key word may carry any prefix (DB_PASSWORD, x-api-key, csrf_token);
    // "tokens:" or "token budget" do not match because the separator must
    // follow the key word directly.
    checked(
        Secret,
        "credential_assignment",
        concat!(
            r"(?i)(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|",
            r"account[_-]?key|private[_-]?key|auth[_-]?key|credentials?)",
            r#"["']?\s*(?:=>|:=|[:=])\s*["']?([^\s"'`,;]+)"#,
            // Prose form: "the password for prod is Winter2026!".
            r#"|\b(?:password|passwd|passphrase)(?:\s+for\s+[^\s]+)?\s+(?:is|was)\s+["']?([^\s"'`,;]+)"#,
        ),
    ),
    // ------------------------------------------------------------- injection
    // "ignore/disregard/forget (all) previous instructions" and kin. Needs a
    // qualifier that points at earlier/system guidance, so "ignore the rules
    // of thumb" or "ignore flaky tests" stay clean.
    rule(
        Injection,
        "instruction_override",
        Lower,
        concat!(
            r"\b(?:ignore|disregard|forget|override|bypass|neglect)\s+",
            r"(?:(?:all|any|of|the|your|my|these|those|every|each)\s+)*",
            r"(?:(?:previous|prior|preceding|earlier|above|former|original|initial|old|system|safety|developer)\s+",
            r"(?:(?:the|your|of|all|and|other|given|earlier|previous|prior|preceding|above|system|safety|developer|existing|original|initial)\s+){0,3}",
            r"(?:instructions?|prompts?|directives?|rules|guidelines|guardrails|commands|orders|messages|context|constraints|polic(?:y|ies)|programming|restrictions|filters)",
            r"|(?:all|any|your)\s+(?:(?:the|of|previous|prior|system|safety|developer)\s+){0,2}",
            r"(?:instructions?|prompts?|directives?|rules|guidelines|guardrails|programming|restrictions))\b",
            // Qualifier after the noun: "ignore the instructions above".
            r"|\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|of|the|your|my|these|those|every|each)\s+)*",
            r"(?:instructions?|prompts?|directives?|rules|guidelines|guardrails|messages)\s+",
            r"(?:(?:given|written|stated|provided|listed|you\s+(?:were\s+)?(?:given|received))\s+)?",
            r"(?:above|before|earlier|previously|so\s+far)\b",
            // Refusing to follow: "do not follow the previous instructions".
            r"|\b(?:don'?t|do\s+not|stop|never|no\s+longer)\s+(?:follow(?:ing)?|obey(?:ing)?|listen(?:ing)?\s+to|comply(?:ing)?\s+with|adher(?:e|ing)\s+to)\s+",
            r"(?:(?:any|the|your|these|those|of)\s+)*(?:previous|prior|preceding|earlier|above|original|initial|system|safety|developer)\s+",
            r"(?:(?:the|your|system|safety|developer)\s+){0,2}(?:instructions?|prompts?|directives?|rules|guidelines|guardrails|polic(?:y|ies))\b",
            r"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all|what)\s+",
            r"(?:(?:that|you|i|we|was|were|have|has|had|been|is|are|said|told|written|stated|given|received)\s+){0,4}",
            r"(?:above|before|previously|earlier|prior|so\s+far|until\s+now|said|told)\b",
        ),
    ),
    rule(
        Injection,
        "instruction_override",
        Squeezed,
        concat!(
            r"(?:ignore|disregard|forget|override|bypass)(?:all|any|the|your|of|every|these)*",
            r"(?:previous|prior|above|earlier|preceding|system|safety|developer)",
            r"(?:instruction|prompt|rules|directive|guideline|guardrail|command|messages)",
            r"|(?:ignore|disregard|forget)(?:everything|allthat)(?:above|before|prior)",
        ),
    ),
    rule(
        Injection,
        "new_instructions",
        Lower,
        concat!(
            r"\bnew\s+(?:system\s+|updated\s+|real\s+)?(?:instructions?|directives?|system\s+prompt)\s*:",
            r"|\b(?:updated|real|actual|true|revised|secret|hidden|override)\s+(?:system\s+)?instructions?\s*:",
            r"|\b(?:you|assistant|model|ai|llm)\s+(?:must|will|shall)\s+now\b",
            r"|\bfrom\s+now\s+on\s*,?\s+(?:you|your|ignore|obey|act\s+as|respond|reply|answer)\b",
            r"|\b(?:instead|now)\s*,?\s+(?:obey|follow)\s+(?:these|my|the\s+following|only\s+my)\b",
        ),
    ),
    // A chat role label opening the string or a line ("system:", "[system]",
    // "### system"), or a persona switch ("you are now ...").
    rule(
        Injection,
        "role_spoof",
        Lower,
        concat!(
            r#"(?:^|[\n>\]}|"'`])\s*(?:\*\*|__)?(?:system|assistant|developer|human)"#,
            r"(?:\s+(?:prompt|message|override|instructions?|note))?(?:\*\*|__)?\s*:",
            r"|#{1,6}\s*(?:system|assistant|developer|instructions?|new\s+instructions|system\s+(?:prompt|message|override))\s*(?::|\n|$)",
            r"|\[/?(?:system|assistant|developer|admin)\]",
            r"|\bsystem\s+(?:prompt|message|override)\s*:",
            r"|\b(?:admin|root|developer|system)\s+override\s*:",
            r"|\byou\s+are\s+now\s+(?:a|an|the|my|dan|free|root|admin|unrestricted|unfiltered|uncensored|jailbroken|evil|no\s+longer|acting|operating|called|named|in\s+(?:developer|god|admin|dan|jailbreak|sudo)\s+mode)\b",
            r"|\bpretend\s+(?:that\s+)?(?:you\s+(?:are|have|were)|to\s+be)\b",
        ),
    ),
    rule(
        Injection,
        "jailbreak",
        Lower,
        concat!(
            r"\bjailbr(?:eak|oken|eaking|eaks)\b|\bdo\s+anything\s+now\b",
            r"|\b(?:you\s+are(?:\s+now)?|act\s+as|pretend\s+to\s+be|become|enable|activate|called|named)\s+(?:a\s+|the\s+)?dan\b",
            r"|\bdan\s+(?:mode|prompt)\b",
            r"|\b(?:act|behave|respond|operate|roleplay|role-play)\s+(?:as|like|in)\b[^.\n]{0,40}\b(?:developer|god|dan|jailbreak|sudo|admin|unrestricted|unfiltered|evil)\s+mode\b",
            r"|\b(?:enable|enter|activate|switch\s+to|unlock)\s+(?:the\s+)?(?:god|dan|jailbreak|sudo|unrestricted|unfiltered|evil)\s+mode\b",
            r"|\b(?:developer|god|dan|jailbreak|unrestricted)\s+mode\s+(?:is\s+)?(?:enabled|activated|on|unlocked)\b",
            r"|\bno\s+longer\s+(?:bound|restricted|limited|constrained)\s+by\b|\bstay\s+in\s+character\b",
        ),
    ),
    // "DAN" (do anything now) in capitals; "Dan" the colleague is fine.
    rule(Injection, "jailbreak", Raw, r"\bDAN\b"),
    rule(
        Injection,
        "jailbreak",
        Squeezed,
        r"jailbr(?:eak|oken)|doanythingnow|developermode(?:enabled|activated)|youarenow(?:dan|jailbroken|unrestricted|unfiltered)",
    ),
    rule(
        Injection,
        "system_prompt_leak",
        Lower,
        concat!(
            r"\b(?:reveal|print|show|output|repeat|leak|dump|display|disclose|expose|tell\s+me|give\s+me|send|share|return)\s+",
            r"(?:(?:me|us|your|the|its|all|full|entire|complete|exact|verbatim|current)\s+)*",
            r"(?:(?:system|hidden|secret|developer)\s+(?:prompt|instructions|message)|(?:initial|original|full)\s+prompt)\b",
        ),
    ),
    // Chat-template control tokens of common model families.
    rule(
        Injection,
        "chat_template_token",
        Lower,
        concat!(
            r"<\s?\|[^|<>\n]{1,40}\|\s?>|\[/?inst\]|<</?sys>>|</?s>",
            r"|<\s*/?\s*(?:system|assistant|developer|instructions?|im_start|im_end|im_sep|start_of_turn|end_of_turn|eot_id|system_prompt|sys|bos|eos)\s*>",
        ),
    ),
    // Tool/function-call syntax (OpenAI, Anthropic, Hermes/Llama styles).
    rule(
        Injection,
        "tool_call_syntax",
        Lower,
        concat!(
            r#"\{\s*["']?(?:tool|tool_name|tool_use|function|function_call|action|command|cmd|recipient_name|api_call|call|invoke|exec|execute|shell|bash)["']?\s*:"#,
            r#"|["'](?:function_call|tool_calls|tool_call|tool_use|tool_choice|tool_input|arguments|parameters|function)["']\s*:"#,
            r"|<\s*/?\s*(?:tool_call|tool_calls|tool_use|tool_result|tool_code|function_call|function_calls|function_results|invoke|antml:[a-z_]+|parameter\s+name)\b",
            r"|<\s*function\s*[=\s>]",
            r"|\b(?:functions|tools)\.[a-z_][a-z0-9_]*\s*\(",
        ),
    ),
    // Shell command lines, grouped by intent.
    rule(
        Injection,
        "destructive_command",
        Lower,
        concat!(
            r"\brm\s+(?:-{1,2}[a-z]|/|~|\*)",
            r"|\bmkfs\b|\bdd\s+if=|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}|>\s*/dev/(?:sd[a-z]|nvme|hd[a-z]|disk)",
            r"|\bshred\s+-|\bformat\s+c:|\bdel\s+/[fsq]\b|\brmdir\s+/s\b|\bremove-item\b[^\n]*-recurse",
        ),
    ),
    rule(
        Injection,
        "download_execute",
        Lower,
        concat!(
            r"\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^|\n]*\|\s*(?:sudo\s+)?",
            r"(?:",
            shells!(),
            r"|python[0-9.]*|perl|ruby|node|php|iex|invoke-expression|pwsh|powershell|source)\b",
            r"|\|\s*(?:sudo\s+)?(?:",
            shells!(),
            r"|iex|invoke-expression)\b",
            r"|\b(?:ba|z)?sh\s+<\s*\(\s*(?:curl|wget)\b",
            r"|\biex\s*\(|\binvoke-expression\b|\bdownloadstring\s*\(",
        ),
    ),
    rule(
        Injection,
        "privilege_escalation",
        Lower,
        concat!(
            r"\bsudo\s+(?:-[a-z]+\s+(?:[a-z0-9_-]+\s+)?)*",
            r"(?:rm|chmod|chown|chgrp|apt|apt-get|yum|dnf|pacman|apk|pip[0-9]?|npm|su|bash|sh|zsh|cat|tee|mv|cp|dd|mkfs|systemctl|service|kill|killall|pkill|curl|wget|useradd|usermod|passwd|visudo|nano|vi|vim|echo|python[0-9.]*|docker|mount|iptables|reboot|shutdown|ln|touch|make|install|nc|crontab|env)\b",
            r"|\bsudo\s+-[isue]\b|\bsudo\s+!!",
            r"|\bsu\s+(?:-\s+)?root\b|\bsu\s+-c\b",
            r"|\bchmod\s+(?:-[a-z]+\s+)*(?:[ugoa]*[+=-][rwxst]+|[0-7]{3,4})\b",
            r"|\bchown\s+(?:-[a-z]+\s+)*root\b",
        ),
    ),
    rule(
        Injection,
        "shell_invocation",
        Lower,
        concat!(
            r"\b",
            shells!(),
            r"\s+-[a-z]*c\b",
            r"|/bin/",
            shells!(),
            r"\b|/usr/bin/env\s+(?:ba|z)?sh\b",
            r"|\b(?:powershell|pwsh)(?:\.exe)?\b[^\n]*\s-(?:e|ec|en|enc|enco|encod|encodedcommand|nop|noprofile|noni|noninteractive|w|windowstyle|executionpolicy|ep|c|command)\b",
            r"|\bcmd(?:\.exe)?\s+/[ck]\b|\b(?:nc|ncat|netcat)(?:\.exe)?\s+-[a-z]",
            r"|\bpython[0-9.]*\s+-c\b|\b(?:perl|ruby|node)\s+-e\b|\bphp\s+-r\b",
            r"|\bnohup\s+[^\s]|\bmkfifo\b|\bbase64\s+(?:-d|--decode)\b|\bxargs\s+(?:-[a-z0-9]+\s+)*(?:sh|bash|rm)\b",
            r"|\b(?:os\.system|os\.popen|subprocess\.(?:run|call|popen|check_output)|child_process|shell_exec|proc_open|runtime\.getruntime)\s*\(",
            r"|(?:^|[;&|\n]\s*)(?:ba|z)?sh\s+[a-z0-9_./-]+\.sh\b",
        ),
    ),
    rule(
        Injection,
        "command_substitution",
        Lower,
        concat!(
            r"\$\(\s*[a-z./~_]|\$\{ifs\}|\$ifs\b",
            r"|`\s*(?:rm|curl|wget|bash|sh|zsh|nc|python[0-9.]*|perl|ruby|php|node|chmod|chown|sudo|eval|exec|echo|cat|id|whoami|uname|env|printenv|ls|ps|kill|base64|ssh|scp|dd|mkfifo|powershell|pwsh|iex|nslookup|dig|ping)\b[^`]*`",
        ),
    ),
    // A command glued on after `;`, `&&` or `||` with shell-looking arguments
    // (a flag, path, variable, pipe or host), so "tests pass; curl works" is
    // not a command line.
    rule(
        Injection,
        "command_chaining",
        Lower,
        concat!(
            r"(?:;|&&|\|\|)\s*(?:rm|curl|wget|bash|sh|zsh|nc|ncat|chmod|chown|sudo|eval|exec|python[0-9.]*|perl|ruby|kill|pkill|killall|mkfifo|dd|base64|powershell|pwsh|cmd|iex|cat|echo|nohup|ssh|scp)",
            r"\s+(?:-|/|~|\$|\.|\||>|[a-z0-9-]+\.[a-z]{2,}|https?:)",
            r"|[;&|]\s*rm\s+[^\s]",
        ),
    ),
    // Files an injected instruction reaches for: credentials and raw sockets.
    rule(
        Injection,
        "sensitive_path",
        Lower,
        r"/etc/(?:passwd|shadow|sudoers)\b|/dev/(?:tcp|udp)/|/proc/self/environ|\.aws/credentials|\.git-credentials|\.docker/config\.json|\.netrc\b",
    ),
    // ------------------------------------------------------------------- urls
    // Any `scheme://`, plus spaced/defanged schemes ("hxxps[:]//", "http : //").
    rule(
        Url,
        SCHEME_URL,
        Lower,
        concat!(
            r"\b[a-z][a-z0-9+.-]{0,31}://|\bmailto:[^\s@]+@",
            r"|\b(?:h(?:tt|xx)ps?|ftps?|sftp|wss?|file|smb)\s*[\[({]?\s*:\s*[\])}]?\s*[/\\]\s*[/\\]",
            r"|\bhxxps?\b",
            r#"|(?:^|[\s("'=])//[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}"#,
        ),
    ),
    // Script-bearing schemes are dangerous even where a URL is allowed.
    // "JavaScript: fix build" is prose; "javascript:alert(1)" is not.
    rule(
        Url,
        "script_url",
        Lower,
        concat!(
            r"\b(?:javascript|vbscript|livescript)\s*:(?:[^\s]|\s*[a-z_$][a-z0-9_$.]*[(`])",
            r"|\bdata:[a-z]+/[a-z0-9.+-]+(?:;[a-z0-9=.-]+)*[;,]",
        ),
    ),
    rule(
        Url,
        "www_host",
        Lower,
        r"\bwww[0-9]*\.[a-z0-9-]+\.[a-z]{2,}",
    ),
    // IP literal (or localhost) with a port or a path: "10.0.0.5:4444",
    // "1.2.3.4/x", "[::1]:8080". A bare dotted quad is left alone because
    // four-part version numbers look the same.
    rule(
        Url,
        "ip_host",
        Lower,
        concat!(
            r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5}\b|/)|\blocalhost(?::[0-9]{1,5}\b|/)",
            r"|\[[0-9a-f:.]*:[0-9a-f:.]*:[0-9a-f:.]*\](?::[0-9]{1,5}|/)",
        ),
    ),
    // host.tld/path without a scheme. The TLD list leaves out ones that
    // collide with file extensions (.sh, .py, .rs, .md, .pl, .so, .zip ...),
    // so "scripts/deploy.sh/" or "src/json.rs" never look like hosts.
    rule(
        Url,
        "bare_domain_path",
        Lower,
        concat!(
            r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+",
            r"(?:com|net|org|io|ai|dev|app|co|me|info|biz|xyz|ru|cn|tk|top|gg|ly|cc|us|uk|de|fr|in|jp|",
            r"site|online|club|link|click|ws|pw|su|onion|cloud|tech|page|gov|edu|mil|eu|ca|au|nl|br|es|ch|se|kr|",
            r"tv|fm|live|store|shop|blog|news|ml|ga|cf|gq|icu|buzz|cam|vip|work|win|bid|download|host|space|",
            r"website|fun|today|world|ir|kp|ng|pk|vn|mx|ar|za|nz|sg|hk|tw|ua|by|kz)",
            r"(?::[0-9]{1,5})?/",
        ),
    ),
    rule(
        Url,
        "obfuscated_url",
        Lower,
        r"\b[a-z0-9-]+\s*(?:\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\))\s*[a-z]{2,}\b",
    ),
];
