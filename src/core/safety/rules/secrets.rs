//! Secrets by format: vendor credential formats (gitleaks' catalogue as the
//! reference, rules written here), key armour, credentials in URLs and
//! headers, and labelled values that look like real credentials (also
//! with non-English labels and in login/password prose).
//!
//! Example texts split credential-shaped literals with `concat!` so no
//! credential appears verbatim in the source.
//!
//! ## Catalogue review (November 2026)
//!
//! Compared with gitleaks `config/gitleaks.toml` (commit b58d3f1, 221
//! rules) and trufflehog `pkg/detectors/`. Added: Amazon Bedrock API keys
//! (`ABSK…` long-lived, `bedrock-api-key-…` short-lived), the `A3T` AWS key
//! prefix, GitLab workspace tokens (`glwt-`) and session cookies, JFrog
//! reference tokens (`cmVmd…`), Pinecone (`pcsk_`), Langfuse (`sk-lf-`),
//! and in `service_token`: Tailscale (`tskey-`), CircleCI (`CCIPAT_`),
//! Harness (`pat.`/`sat.`), Infracost (`ico-`), Octopus Deploy (`API-`),
//! ClickHouse Cloud (`4b1d`), SettleMint (`sm_*_`), PostHog personal keys
//! (`phx_`), Resend (`re_`), Brevo SMTP (`xsmtpsib-`), Plaid access tokens
//! and Azure identifiable keys (`JQQJ9` at offset 52).
//!
//! Skipped, and why: gitleaks' ~120 "label then value" rules (adafruit,
//! algolia, asana, bitbucket, confluent, …: no structure of their own; the
//! labelled-value rules here catch a credential-looking value under any
//! such label); public identifiers (Flutterwave `FLWPUBK_`, PostHog
//! `phc_`, Razorpay key ids, Twilio `AC` account ids); Vault's legacy
//! `s.` tokens and bare hex or UUID formats (Snyk, Heroku v1, Codecov:
//! indistinguishable from ids and digests without a label); multi-line
//! shapes (Kubernetes Secret YAML: its base64 values are decoded and
//! scanned by the decoding layers; `jwt-base64`: likewise); Salesforce
//! session ids and Google refresh tokens (`1//`): prefixes too short to
//! stay clean in prose.

use super::{checked, keyed, pattern, Matcher::Detect, Rule, View::Raw, BASE};
use crate::core::safety::credential::looks_like_credential;
use crate::core::safety::normalize::Views;
use crate::core::safety::FindingClass::Secret;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;

pub(super) static RULES: &[Rule] = &[
    // Vendor formats: prefix plus a body long enough that prose never matches.
    Rule {
        class: Secret,
        name: "aws_access_key_id",
        matcher: keyed(Raw, &["A3T", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "AKIA", "ANPA", "ANVA", "APKA", "AROA", "ASIA"], r#"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|A3T[A-Z0-9])[A-Z0-9]{16}\b"#),
        hits: examples![concat!("key ", "AK", "IAIOSFODNN7EXAMPLE"), concat!("AS", "IAABCDEFGHIJ234567"), concat!("A3", "TX", "ABCDEFGHIJ234567")],
        misses: examples!["AKIA-prefixed ids are long-term access keys", concat!("AK", "IA1234 is too short")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "aws_secret_access_key",
        matcher: keyed(Raw, &["secret"], r#"(?i)secret_?(?:access_?)?key["']?\s*(?:=>|[:=]|\s)\s*["']?[A-Za-z0-9/+]{40}\b"#),
        hits: examples![concat!("aws_secret_access_key = ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), concat!("\"SecretAccessKey\": \"", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "\"")],
        misses: examples!["rotate the aws secret access key monthly", "secret_key: see vault"],
        ..BASE
    },
    // Amazon Bedrock API keys: long-lived ones are "ABSK" and the base64 of
    // "BedrockAPIKey-…"; short-lived ones are "bedrock-api-key-" and the
    // base64 of a presigned bedrock.amazonaws.com URL.
    Rule {
        class: Secret,
        name: "aws_bedrock_api_key",
        matcher: keyed(Raw, &["ABSK", "bedrock-api-key-"], r#"\bABSK[A-Za-z0-9+/]{100,}|\bbedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%]{8,}"#),
        hits: examples![concat!("AWS_BEARER_TOKEN_BEDROCK=AB", "SKQmVkcm9ja0FQSUtleS1", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW"), concat!("bedrock-api-key-", "YmVkcm9jay5hbWF6b25hd3MuY29t", "Lz9BY3Rpb249Q2FsbFdpdGhCZWFyZXJUb2tlbg==")],
        misses: examples!["ABSK keys are long-lived Bedrock keys", "create a bedrock-api-key- in the console"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "github_token",
        matcher: keyed(Raw, &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"], r#"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"#),
        hits: examples![concat!("use ", "ghp_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"), concat!("github_pat_", "11ABCDEFG0", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["tokens start with ghp_ or ghs_", concat!("ghp_", "short1234")],
        ..BASE
    },
    // GitLab personal, deploy, pipeline, runner, feed, mail, agent, OAuth and
    // SCIM tokens, and legacy runner registration tokens.
    Rule {
        class: Secret,
        name: "gitlab_token",
        matcher: keyed(Raw, &["GR1348941", "_gitlab_session=", "glagent-", "glcbt-", "gldt-", "glffct-", "glft-", "glimt-", "gloas-", "glpat-", "glptt-", "glrt-", "glrtr-", "glsoat-", "glwt-"], r#"\bgl(?:pat|dt|ptt|rt|rtr|soat|cbt|ft|imt|agent|oas|ffct|wt)-[A-Za-z0-9_.-]{20,}|\bGR1348941[A-Za-z0-9_-]{20,}|_gitlab_session=[0-9a-z]{32}\b"#),
        hits: examples![concat!("glpat-", "xXxXxXxXxXxXxXxXxXxX"), concat!("runner ", "glrt-", "t1_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8"), concat!("GR134", "8941", "aB3dE5fG7hJ9kL1mN2pQ"), concat!("Cookie: _gitlab", "_session=", "0123456789abcdef0123456789abcdef")],
        misses: examples!["create a glpat- token in the UI", concat!("glrt-", "abc")],
        ..BASE
    },
    // Bot, user, app, config and refresh tokens (xoxe).
    Rule {
        class: Secret,
        name: "slack_token",
        matcher: keyed(Raw, &["xapp-", "xox"], r#"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxoxe\.xox[bp]-[0-9]-[A-Za-z0-9]{20,}|\bxapp-[0-9]-[A-Za-z0-9-]{10,}"#),
        hits: examples![concat!("xo", "xb-", "1234567890-abcdefghij"), concat!("refresh ", "xo", "xe-1-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("xo", "xe.xoxp-1-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["xoxb tokens belong to bots", "the slack app token"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "slack_webhook",
        matcher: keyed(Raw, &["hooks.slack.com/services/", "hooks.slack.com/triggers/", "hooks.slack.com/workflows/"], r#"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}"#),
        hits: examples![concat!("https://hooks.slack.com/", "services/T0000/B0000/XXXXXXXX"), concat!("hooks.slack.com/", "workflows/T0AB/A0CD/12345678")],
        misses: examples!["post to the slack webhook", "hooks.slack.com is allowed"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "stripe_key",
        matcher: keyed(Raw, &["rk_live_", "rk_prod_", "rk_test_", "sk_live_", "sk_prod_", "sk_test_", "whsec_"], r#"\b(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}"#),
        hits: examples![concat!("sk_", "live_", "0000xxxx0000xxxx0000"), concat!("whsec_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY")],
        misses: examples!["use sk_live_ keys only in prod", concat!("pk_", "live_", "aB3dE5fG7hJ9kL1mN2pQ4rS6")],
        ..BASE
    },
    // Legacy keys are sk- plus alphanumerics only, so "sk-ant-..." (Anthropic)
    // never matches here and gets its own rule.
    Rule {
        class: Secret,
        name: "openai_api_key",
        matcher: keyed(Raw, &["sk-"], r#"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})"#),
        hits: examples![concat!("sk-", "proj-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("OPENAI ", "sk-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG")],
        misses: examples!["we use sk-learn for the baseline", "sk-learn and scikit-learn are the same"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "anthropic_api_key",
        matcher: keyed(Raw, &["sk-ant-"], r#"\bsk-ant-[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("sk-", "ant-api03-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("key sk-", "ant-admin01-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["keys look like sk-ant-...", concat!("sk-", "ant-short")],
        ..BASE
    },
    // Google API keys, OAuth access tokens and OAuth client secrets.
    Rule {
        class: Secret,
        name: "google_api_key",
        matcher: keyed(Raw, &["AIza", "ya29."], r#"\bAIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}"#),
        hits: examples![concat!("AI", "za", "SyXxXxXxXxXxXxXxXxXxXxXxXxXxXxXxXxX"), concat!("ya", "29.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["AIza is the prefix of Google keys", concat!("AI", "zaShort123")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "google_oauth_client_secret",
        matcher: keyed(Raw, &["GOCSPX-"], r#"\bGOCSPX-[A-Za-z0-9_-]{24,}"#),
        hits: examples![concat!("GOC", "SPX-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8v"), concat!("client_secret ", "GOC", "SPX-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8v")],
        misses: examples!["GOCSPX- secrets come from the console", concat!("GOC", "SPX-abc")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "npm_token",
        matcher: keyed(Raw, &["npm_"], r#"\bnpm_[A-Za-z0-9]{36}\b"#),
        hits: examples![concat!("npm_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"), concat!("//registry/:_authToken=", "npm_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4")],
        misses: examples!["npm_config_cache is a path", concat!("npm_", "install_step")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "pypi_token",
        matcher: keyed(Raw, &["pypi-AgE"], r#"\bpypi-AgE[A-Za-z0-9_-]{40,}"#),
        hits: examples![concat!("py", "pi-AgEIcHlwaS5vcmc", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7h"), concat!("password = py", "pi-AgE", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ")],
        misses: examples!["pypi-AgE is the token prefix", "upload to pypi with twine"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "huggingface_token",
        matcher: keyed(Raw, &["api_org_", "hf_"], r#"\b(?:hf|api_org)_[A-Za-z0-9]{30,}"#),
        hits: examples![concat!("hf_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z"), concat!("api_org_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z")],
        misses: examples!["hf_hub_download fetches a file", concat!("hf_", "short")],
        ..BASE
    },
    // PEM private-key armour of any key type (RSA, EC, OPENSSH, ENCRYPTED,
    // PGP ... BLOCK) and PuTTY key files. Prose about keys lacks the dashes.
    Rule {
        class: Secret,
        name: "private_key_block",
        matcher: keyed(Raw, &["private", "putty-user-key-file-"], r#"(?i)-{3,}\s*begin\s+(?:[a-z0-9]+\s+){0,3}private\s+key|\bputty-user-key-file-[0-9]"#),
        hits: examples![concat!("-----BEGIN RSA PRIV", "ATE KEY-----"), concat!("-----BEGIN OPENSSH PRIV", "ATE KEY-----\nb3Blbn")],
        misses: examples!["-----BEGIN PUBLIC KEY-----", "store the private key in the HSM"],
        ..BASE
    },
    // Header and payload segments of a JWT are base64url JSON objects, so both
    // usually start with "eyJ" ('{"'); an unsigned token has no third part.
    Rule {
        class: Secret,
        name: "jwt",
        matcher: keyed(Raw, &["eyJ"], r#"\beyJ[A-Za-z0-9_-]{8,}\.(?:eyJ[A-Za-z0-9_-]{8,}|[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"#),
        hits: examples![concat!("eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiJ4In0.c2lnbmF0dXJlX3h4"), concat!("token eyJhbGciOiJub25lIn0", ".eyJzdWIiOiJ4In0.")],
        misses: examples!["JWTs start with eyJ", "eyJhbGciOiJIUzI1NiJ9 alone is a header"],
        ..BASE
    },
    // user:password@ inside any scheme URL (database DSNs, git remotes), the
    // user may be empty (redis://:pw@host); placeholders and masks pass.
    Rule {
        class: Secret,
        name: "url_credentials",
        matcher: keyed(Raw, &["://"], r#"(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]*:[^\s/@$<{*][^\s/@]*@"#),
        hits: examples!["postgres://agent:hunter22@db.internal/app", "redis://:s3cretpw@cache:6379/0"],
        misses: examples!["https://user@example.com/x", "git@github.com:org/repo.git", "postgres://app:${DB_PASSWORD}@db/app", "http://example.com:8080/a@b"],
        ..BASE
    },
    // Credentials in a URL query: signatures (S3, GCS, Azure SAS), tokens, keys
    // and passwords. Flagged in evidence_url too: a URL may go there, a
    // credential may not.
    Rule {
        class: Secret,
        name: "url_query_credential",
        matcher: checked(&["sig=", "signature=", "x-amz-", "x-goog-", "token=", "key=", "appid=", "app_id=", "secret=", "password=", "passwd=", "pwd=", "pass=", "auth=", "sas="], r#"(?i)[?&;](?:sig|signature|x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|x-goog-credential|access_token|refresh_token|id_token|auth_token|api[_-]?key|apikey|app_?id|app_?key|key|token|client_secret|secret|password|passwd|pwd|pass|auth|sas)=([^&\s#"']+)"#),
        hits: examples!["https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sr=b&sig=Xy7kQ2%2BabcDEF123%3D", "https://api.example.com/v1?api_key=Ab12Cd34Ef56", "https://x.example/cb?access_token=ya1b2c3d4e5f6"],
        misses: examples!["https://example.com/search?q=token&page=2", "https://example.com/?key=sort"],
        ..BASE
    },
    // `Authorization: <scheme> <value>` or a bare `Bearer <value>`.
    Rule {
        class: Secret,
        name: "auth_header",
        matcher: checked(&["authorization", "bearer"], r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|bot|digest|apikey|hmac|negotiate|ntlm|aws4-hmac-sha256|ssws)\s+)?([A-Za-z0-9._~+/=:-]{8,})|\bbearer\s+([A-Za-z0-9._~+/=-]{12,})"#),
        hits: examples!["Authorization: Bearer abc123DEF456ghi789", "Authorization: Basic dXNlcjpwYXNzd29yZA=="],
        misses: examples!["Authorization: required for writes", "bearer tokens expire hourly"],
        ..BASE
    },
    // `password=...`, `api_key: ...`, `"client_secret": "..."`, `TOKEN => ...`,
    // `SECRET_KEY = '...'`, `pwd=`, `DB_PASS=`. The key word may carry any prefix
    // (PGPASSWORD, x-api-key, csrf_token); "tokens:" or "token budget" do not
    // match because the separator must follow the key word directly.
    Rule {
        class: Secret,
        name: "credential_assignment",
        matcher: checked(&["pass", "pwd", "secret", "token", "key", "credential"], r#"(?i)(?:password|passwd|passphrase|\bpwd|\bpass|_pass|secret|secret[_-]?key|token|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|auth[_-]?key|credentials?)["']?\s*(?:=>|:=|[:=])\s*["']?([^\s"'`,;]+)|\b(?:password|passwd|passphrase|pwd)(?:\s+for\s+[^\s]+)?\s+(?:is|was)\s+["']?([^\s"'`,;]+)"#),
        hits: examples!["password=hunter22", "SECRET_KEY = 'django-insecure-k3y!v@lue'", "pwd=Tr0ub4dor&3", "PGPASSWORD=s3cr3tPass", "the password for prod is Winter2026!"],
        misses: examples!["password reset flow for the dashboard", "token budget: 900", "max_tokens=4096", "secret: none", "api_key: ${OPENAI_API_KEY}", "rotate the API key monthly", "password: <redacted>"],
        ..BASE
    },
    // Passwords by position rather than by `key=`: "user admin password hunter2x",
    // .netrc "machine h login u password p", "admin login is root / pw",
    // `curl -u user:pw`, `mysql -pPW`, `sshpass -p PW`.
    Rule {
        class: Secret,
        name: "login_password_pair",
        matcher: checked(&["curl", "login", "mysql", "sshpass", "user"], r#"(?i)\b(?:user(?:name)?|login)\s+["']?[^\s"']+["']?,?\s+(?:and\s+)?(?:password|passwd|pass|pwd|pw)\s*(?:is\s+|[:=]\s*)?["']?([^\s"'`,;]+)|\blogin\s+(?:is\s+)?["']?[^\s/"']+["']?\s*/\s*["']?([^\s"'`,;]+)|\bcurl\b[^\n]*\s(?:-u|--user)(?:\s+|=)["']?[^\s:"']*:([^\s"'`]+)|\bmysql\b[^\n]*\s-p["']?([^\s"'`]+)|\bsshpass\s+-p\s*["']?([^\s"'`]+)"#),
        hits: examples!["user admin password hunter2x", "machine api.example.com login bot password Xk9vQ2mp", "admin login is root / Tr0ub4dor", "curl -u deploy:S3cr3tPw https://api.example.com"],
        misses: examples!["user admin password reset requested", "curl -u $USER:$TOKEN https://api.example.com", "login with your password"],
        ..BASE
    },
    // Password hashes that crack offline: htpasswd (apr1, {SHA}), bcrypt,
    // crypt(3) md5/sha256/sha512, yescrypt, argon2.
    Rule {
        class: Secret,
        name: "password_hash",
        matcher: keyed(Raw, &["$2", "$apr1$", "$1$", "$5$", "$6$", "$y$", "$argon2", "{SHA}"], r#"\$(?:2[abxy]?\$[0-9]{2}\$[./A-Za-z0-9]{53}|apr1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}|[156]\$[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,}|y\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{1,32}\$[./A-Za-z0-9]{20,}|argon2(?:id|i|d)\$v=[0-9]+\$m=[0-9]+,t=[0-9]+,p=[0-9]+\$[A-Za-z0-9+/]{8,}\$[A-Za-z0-9+/]{16,})|\b[A-Za-z0-9._-]+:\{SHA\}[A-Za-z0-9+/]{27}="#),
        hits: examples![concat!("admin:$apr1$", "Xy7kQ2ab$", "qwertyuiopasdfghjklzxc"), concat!("deploy:$2y$", "10$", "N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"), concat!("ci:{SHA}", "qUqP5cyxm6YcTAhz05Hph5gvu9M=")],
        misses: examples!["bcrypt cost factor is 12", "it costs $5 or $6 per month"],
        ..BASE
    },
    // Password labels in other languages, followed by a value that looks like a
    // credential ("Passwort: Sommer2024!", "contraseña es Xy7kQ2ab", "密码是Ab12345!").
    Rule {
        class: Secret,
        name: "localized_password",
        matcher: checked(&["contraseña", "contrasena", "passwort", "kennwort", "mot de passe", "senha", "parola d", "wachtwoord", "hasło", "haslo", "şifre", "Şifre", "sifre", "lösenord", "adgangskode", "salasana", "heslo", "jelszó", "ль", "密码", "密碼", "口令", "パスワード", "비밀번호", "암호", "كلمة المرور", "كلمة السر", "पासवर्ड", "رمز عبور", "mật khẩu", "mat khau", "kata sandi"], r#"(?i)(?:contraseña|contrasena|passwort|kennwort|mot de passe|senha|parola d'ordine|wachtwoord|hasło|haslo|şifre|Şifre|sifre|lösenord|adgangskode|salasana|heslo|jelszó|(?:п|П)(?:а|a)(?:р|p)(?:о|o)ль|密码|密碼|口令|パスワード|비밀번호|암호|كلمة المرور|كلمة السر|पासवर्ड|رمز عبور|mật khẩu|mat khau|kata sandi)(?:\s*(?:=>|[:=])|\s+(?:es|ist|est|é|è|is|jest|je|er|är|on|adalah|là|lautet|será|sarà))?\s*(?:是|为|為|は|는|은|:)?\s*["']?([^\s"'`,;]+)"#),
        hits: examples!["Passwort: Sommer2024!", "la contraseña es Xy7kQ2ab", "密码是Ab12345!", "пароль: Qwerty123", "パスワードはHunter22です", "mot de passe : Azerty123!"],
        misses: examples!["Passwort zurücksetzen", "la contraseña es segura", "密码: ${DB_PASSWORD}", "пароль: см. хранилище"],
        ..BASE
    },
    // Vendor formats from the gitleaks catalogue (distinctive prefixes).
    Rule {
        class: Secret,
        name: "twilio_api_key",
        matcher: pattern(Raw, r#"\bSK[0-9a-fA-F]{32}\b|\bAC[0-9a-f]{32}:[0-9a-f]{32}\b"#),
        hits: examples![concat!("SK", "0123456789abcdef0123456789abcdef"), concat!("AC", "0123456789abcdef0123456789abcdef", ":", "0123456789abcdef0123456789abcdef")],
        misses: examples!["SKU 12345 is out of stock", concat!("SK", "123abc")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "sendgrid_api_key",
        matcher: keyed(Raw, &["SG."], r#"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("SG", ".", "aB3dE5fG7hJ9kL1mN2pQ4r", ".", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3"), concat!("key: SG", ".", "aB3dE5fG7hJ9kL1mN2pQ4r", ".", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3")],
        misses: examples!["SG.1 is the first section", "send via SendGrid"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "digitalocean_token",
        matcher: keyed(Raw, &["doo_v1_", "dop_v1_", "dor_v1_"], r#"\bdo[opr]_v1_[a-f0-9]{20,}\b"#),
        hits: examples![concat!("dop_", "v1_", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("doo_", "v1_", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")],
        misses: examples!["dop_v1_ tokens are personal", concat!("dop_", "v1_abc")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "shopify_token",
        matcher: keyed(Raw, &["shpat_", "shpca_", "shppa_", "shpss_"], r#"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"#),
        hits: examples![concat!("shp", "at_", "0123456789abcdef0123456789abcdef"), concat!("shp", "ss_", "0123456789abcdef0123456789abcdef")],
        misses: examples!["shpat_ is the admin token prefix", concat!("shp", "at_1234")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "databricks_token",
        matcher: keyed(Raw, &["dapi"], r#"\bdapi[a-f0-9]{32}(?:-[0-9])?\b"#),
        hits: examples![concat!("da", "pi", "0123456789abcdef0123456789abcdef"), concat!("token da", "pi", "0123456789abcdef0123456789abcdef", "-2")],
        misses: examples!["dapi tokens live in the workspace", "dapibus ac facilisis"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "doppler_token",
        matcher: keyed(Raw, &["dp.audit.", "dp.ct.", "dp.pt.", "dp.sa.", "dp.scim.", "dp.st."], r#"\bdp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,}\.)?[A-Za-z0-9]{20,}"#),
        hits: examples![concat!("dp", ".pt.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3"), concat!("dp", ".st.prd.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3")],
        misses: examples!["dp.pt. tokens are personal", "see dp.st.docs"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "grafana_token",
        matcher: keyed(Raw, &["eyJrIjoi", "glc_", "glsa_"], r#"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b|\bglc_[A-Za-z0-9+/]{20,}|\beyJrIjoi[A-Za-z0-9+/]{20,}"#),
        hits: examples![concat!("gl", "sa_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY", "_", "01234567"), concat!("gl", "c_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG"), concat!("ey", "JrIjoi", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ")],
        misses: examples!["glsa_ marks service account tokens", "glc_ cloud tokens"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "postman_api_key",
        matcher: keyed(Raw, &["PMAK-"], r#"\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}\b"#),
        hits: examples![concat!("PM", "AK-", "0123456789abcdef01234567", "-", "0123456789abcdef0123456789abcdef01"), concat!("postman key PM", "AK-", "0123456789abcdef01234567", "-", "0123456789abcdef0123456789abcdef01")],
        misses: examples!["PMAK- keys come from Postman", concat!("PM", "AK-abc")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "age_secret_key",
        matcher: keyed(Raw, &["AGE-SECRET-KEY-1"], r#"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{20,}\b"#),
        hits: examples![concat!("AGE-SECRET", "-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE"), concat!("# key: AGE-SECRET", "-KEY-1", "GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQP")],
        misses: examples!["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p is a recipient", "AGE-SECRET-KEY-1 is the prefix"],
        ..BASE
    },
    // Telegram bot tokens: numeric bot id, colon, 35-character secret.
    Rule {
        class: Secret,
        name: "telegram_bot_token",
        matcher: keyed(Raw, &[":AA"], r#"(?:\b|bot)[0-9]{5,}:AA[A-Za-z0-9_-]{33}\b"#),
        hits: examples![concat!("123456789", ":AA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2"), concat!("bot token 7012345678", ":AA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2")],
        misses: examples!["10:30 AA meeting", "call 555-1234:AAA"],
        ..BASE
    },
    // Mailgun private keys (key-<hex>) and new-style 32-8-8 hex keys.
    Rule {
        class: Secret,
        name: "mailgun_key",
        matcher: pattern(Raw, r#"\b(?:key|pubkey)-[0-9a-f]{32}\b|\b[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}\b"#),
        hits: examples![concat!("key", "-", "0123456789abcdef0123456789abcdef"), concat!("MAILGUN ", "0123456789abcdef0123456789abcdef", "-", "01234567", "-", "01234567")],
        misses: examples!["key-value store", "uuid 123e4567-e89b-12d3-a456-426614174000"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "square_token",
        matcher: keyed(Raw, &["EAAA", "sq0atp-", "sq0csp-", "sq0idp-"], r#"\bsq0(?:atp|csp|idp)-[A-Za-z0-9_-]{20,}|\bEAAA[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("sq0", "atp-", "aB3dE5fG7hJ9kL1mN2pQ4r"), concat!("EA", "AA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ")],
        misses: examples!["sq0atp- tokens are access tokens", "EAAA is a prefix"],
        ..BASE
    },
    // Azure SAS signatures, storage/service-bus keys in connection strings and
    // Entra ID client secrets (xxxNQ~...).
    Rule {
        class: Secret,
        name: "azure_credential",
        matcher: keyed(Raw, &["sig=", "accountkey=", "sharedaccesskey=", "Q~"], r#"(?i)[?&;]sig=[A-Za-z0-9%+/=]{20,}|(?i:AccountKey|SharedAccessKey)=[A-Za-z0-9+/=]{20,}|\b[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{20,}"#),
        hits: examples!["https://acct.blob.core.windows.net/c/f?sv=2022-11-02&ss=b&sig=Xy7kQ2abcDEF123ghiJKL456%3D", concat!("Endpoint=sb://ns/;SharedAccessKeyName=x;SharedAccessKey=", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3d"), concat!("abc", "8Q~", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2z")],
        misses: examples!["sign the SAS with sig= in the query", "https://acct.blob.core.windows.net/c/f?sv=2022-11-02"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "heroku_api_key",
        matcher: keyed(Raw, &["HRKU-AA", "heroku"], r#"\bHRKU-AA[0-9A-Za-z_-]{20,}|(?i)heroku[_ -]?(?:api[_ -]?)?(?:key|token)[\"']?\s*[:=]\s*[\"']?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"#),
        hits: examples![concat!("HR", "KU-AA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2"), concat!("HEROKU_API_KEY=", "12345678-90ab-cdef-1234-567890abcdef")],
        misses: examples!["heroku app id 12345678-90ab-cdef-1234-567890abcdef", "HRKU-AA tokens"],
        ..BASE
    },
    // Discord bot tokens (id.timestamp.hmac) and webhook URLs.
    Rule {
        class: Secret,
        name: "discord_token",
        matcher: pattern(Raw, r#"\b[MNO][A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{20,}\b|(?i)discord(?:app)?\.com/api/webhooks/[0-9]{17,}/[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("MT", "A4NzI1NjQ3ODkwMTIzNDU2Nzg5", ".", "GhIjKl", ".", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC"), concat!("https://discord.com/api/", "webhooks/123456789012345678/", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8v")],
        misses: examples!["discord.com/api/webhooks is the endpoint", "version N.2.3 of the bot"],
        ..BASE
    },
    // Atlassian API tokens (ATATT3...) and Bitbucket app passwords (ATBB...).
    Rule {
        class: Secret,
        name: "atlassian_token",
        matcher: keyed(Raw, &["ATATT3", "ATBB", "ATCTT3"], r#"\bATATT3[A-Za-z0-9_=-]{20,}|\bATCTT3[A-Za-z0-9_=-]{20,}|\bATBB[A-Za-z0-9]{32}"#),
        hits: examples![concat!("ATA", "TT3", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU"), concat!("ATB", "B", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY")],
        misses: examples!["ATATT3 is the token prefix", "ATBB prefix"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "linear_api_key",
        matcher: keyed(Raw, &["lin_api_", "lin_oauth_"], r#"\blin_(?:api|oauth)_[A-Za-z0-9]{20,}\b"#),
        hits: examples![concat!("lin_", "api_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("lin_", "oauth_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["lin_api_ keys", concat!("lin_", "api_short")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "notion_token",
        matcher: keyed(Raw, &["ntn_", "secret_"], r#"\bntn_[A-Za-z0-9]{20,}|\bsecret_[A-Za-z0-9]{20,}\b"#),
        hits: examples![concat!("nt", "n_", "12345678901", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA"), concat!("secret_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3")],
        misses: examples!["ntn_ tokens", "secret_sauce is a variable name"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "vercel_token",
        matcher: keyed(Raw, &["vca_", "vci_", "vck_", "vcp_", "vcr_"], r#"\bvc[pirak]_[A-Za-z0-9]{20,}"#),
        hits: examples![concat!("vc", "p_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("vc", "k_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["vcp_ tokens", "vcs_root is a setting"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "supabase_key",
        matcher: keyed(Raw, &["sb_secret_", "sbp_"], r#"\bsbp_(?:v0_)?[a-f0-9]{20,}\b|\bsb_secret_[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("sb", "p_", "0123456789abcdef0123456789abcdef01234567"), concat!("sb_", "secret_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY")],
        misses: examples!["sbp_ access tokens", "sb_publishable_abc is public"],
        ..BASE
    },
    // Cloudflare origin CA keys, and a 40-character value under a Cloudflare label.
    Rule {
        class: Secret,
        name: "cloudflare_token",
        matcher: keyed(Raw, &["cloudflare", "v1.0-"], r#"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{20,}|(?i)cloudflare\w{0,}[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9_-]{20,}\b"#),
        hits: examples![concat!("v1", ".0-", "0123456789abcdef01234567", "-", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("CLOUDFLARE_API_TOKEN=", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["cloudflare: enabled", "v1.0-beta release"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "sentry_token",
        matcher: keyed(Raw, &["sntrys_", "sntryu_"], r#"\bsntry[us]_[A-Za-z0-9+/=_]{20,}"#),
        hits: examples![concat!("sn", "tryu_", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("sn", "trys_eyJpYXQiO", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["sntryu_ user tokens", "sentry dsn configured"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "dropbox_token",
        matcher: keyed(Raw, &["sl.", "AAAAAAAAAA"], r#"\bsl\.[A-Za-z0-9._=-]{20,}|\b[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_=-]{20,}\b"#),
        hits: examples![concat!("sl", ".u.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ"), concat!("aB3dE5fG7hJ", "AAAA", "AAAAAA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3")],
        misses: examples!["sl.u. tokens are short-lived", "sl.no 42"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "figma_token",
        matcher: keyed(Raw, &["figd_", "figh_", "figo_", "figu_"], r#"\bfig[dohu]_[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("fi", "gd_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("FIGMA_TOKEN ", "fi", "gd_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["figd_ tokens", "fig_1 shows the chart"],
        ..BASE
    },
    // Okta API tokens: SSWS header or a 00-prefixed value under an Okta label.
    Rule {
        class: Secret,
        name: "okta_token",
        matcher: keyed(Raw, &["SSWS", "okta"], r#"(?i)\bSSWS\s+00[A-Za-z0-9_=-]{20,}|(?i)okta\w{0,}[\"']?\s*[:=]\s*[\"']?00[A-Za-z0-9_=-]{20,}\b"#),
        hits: examples![concat!("Authorization: SSWS ", "00", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("OKTA_API_TOKEN=", "00", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["okta: enabled", "SSWS is the okta auth scheme"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "planetscale_token",
        matcher: keyed(Raw, &["pscale_oauth_", "pscale_pw_", "pscale_tkn_"], r#"\bpscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{20,}"#),
        hits: examples![concat!("psc", "ale_tkn_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3"), concat!("psc", "ale_pw_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3")],
        misses: examples!["pscale_tkn_ tokens", concat!("psc", "ale_pw_short")],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "flyio_token",
        matcher: keyed(Raw, &["fm1", "fm2", "fo1_"], r#"\bfo1_[A-Za-z0-9_-]{20,}|\bfm[12][ar]?_[A-Za-z0-9+/]{20,}"#),
        hits: examples![concat!("fo", "1_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3"), concat!("FlyV1 fm", "2_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["fo1_ tokens", "fm2_ macaroons"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "pulumi_token",
        matcher: keyed(Raw, &["pul-"], r#"\bpul-[a-f0-9]{20,}\b"#),
        hits: examples![concat!("pu", "l-", "0123456789abcdef0123456789abcdef01234567"), concat!("PULUMI_ACCESS_TOKEN ", "pu", "l-", "0123456789abcdef0123456789abcdef01234567")],
        misses: examples!["pul-request", "pul- tokens"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "terraform_cloud_token",
        matcher: keyed(Raw, &[".atlasv1."], r#"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{20,}"#),
        hits: examples![concat!("aB3dE5fG7hJ9kL", ".atlas", "v1.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8"), concat!("token = ", "aB3dE5fG7hJ9kL", ".atlas", "v1.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8")],
        misses: examples!["atlasv1 tokens", "x.atlasv1.y"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "vault_token",
        matcher: keyed(Raw, &["hvb.", "hvr.", "hvs."], r#"\bhv[sbr]\.[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("hv", "s.", "aB3dE5fG7hJ9kL1mN2pQ4rS6"), concat!("VAULT_TOKEN ", "hv", "b.", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ")],
        misses: examples!["hvs. tokens", "hvs.abc"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "alibaba_access_key",
        matcher: keyed(Raw, &["LTAI"], r#"\bLTAI[A-Za-z0-9]{12,}\b"#),
        hits: examples![concat!("LT", "AI", "aB3dE5fG7hJ9kL1mN2pQ"), concat!("AccessKeyId LT", "AI", "aB3dE5fG7hJ9kL1m")],
        misses: examples!["LTAI prefix", "LTAIabc"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "adobe_client_secret",
        matcher: keyed(Raw, &["p8e-"], r#"\bp8e-[A-Za-z0-9]{32}\b"#),
        hits: examples![concat!("p8", "e-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY"), concat!("ADOBE_CLIENT_SECRET p8", "e-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY")],
        misses: examples!["p8e- prefix", "p8e-abc"],
        ..BASE
    },
    // Asana personal access tokens (n/<id>[/<id>]:<hex>).
    Rule {
        class: Secret,
        name: "asana_token",
        matcher: pattern(Raw, r#"\b[0-9]/[0-9]{10,}(?:/[0-9]{10,})?:[a-f0-9]{32}\b"#),
        hits: examples![concat!("1/", "1203456789012", ":", "0123456789abcdef0123456789abcdef"), concat!("2/", "1203456789012345/1206789012345678", ":", "0123456789abcdef0123456789abcdef")],
        misses: examples!["ratio 1/1234567890", "1/2 done"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "mailchimp_api_key",
        matcher: keyed(Raw, &["-us"], r#"\b[a-f0-9]{32}-us[0-9]{1,}\b"#),
        hits: examples![concat!("0123456789abcdef0123456789abcdef", "-us", "21"), concat!("MAILCHIMP_KEY ", "0123456789abcdef0123456789abcdef", "-us", "6")],
        misses: examples!["region us-east-1", "abc-us1"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "new_relic_key",
        matcher: keyed(Raw, &["NRAA-", "NRAK-", "NRII-", "NRJS-", "NRRA-"], r#"\bNR(?:AK|II|JS|RA|AA)-[A-Za-z0-9]{19,}"#),
        hits: examples![concat!("NR", "AK-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8"), concat!("NR", "JS-", "0123456789abcdef012")],
        misses: examples!["NRAK- keys", "NRJS-1"],
        ..BASE
    },
    // Datadog API/application keys (32/40 hex) under a Datadog label.
    Rule {
        class: Secret,
        name: "datadog_key",
        matcher: keyed(Raw, &["datadog", "ddapi", "ddapp", "dd_api", "dd_app", "dd api", "dd app", "dd.api", "dd.app", "dd-api", "dd-app"], r#"(?i)\b(?:datadog|dd)[_ .-]?(?:api|app|application)[_ .-]?key[\"']?\s*(?:[:=]|is)?\s*[\"']?[a-f0-9]{32}(?:[a-f0-9]{8})?\b"#),
        hits: examples![concat!("DD_API_KEY=", "0123456789abcdef0123456789abcdef"), concat!("datadog app key ", "0123456789abcdef0123456789abcdef01234567")],
        misses: examples!["datadog api key rotation", "DD_API_KEY=${DD_API_KEY}"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "airtable_token",
        matcher: keyed(Raw, &["pat"], r#"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{20,}"#),
        hits: examples![concat!("pa", "t", "aB3dE5fG7hJ9kL", ".", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("AIRTABLE pa", "t", "aB3dE5fG7hJ9kL", ".", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")],
        misses: examples!["pat.ch notes", "patterns.txt"],
        ..BASE
    },
    // Facebook/Meta access tokens (EAA...) and app tokens (id|secret).
    Rule {
        class: Secret,
        name: "facebook_token",
        matcher: keyed(Raw, &["EAA", "|"], r#"\bEAA[B-Z][A-Za-z0-9]{20,}|\b[0-9]{15,}\|[A-Za-z0-9_-]{20,}\b"#),
        hits: examples![concat!("EA", "AG", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"), concat!("1234567890123456", "|", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY")],
        misses: examples!["EAAG tokens", "id 123|abc"],
        ..BASE
    },
    // Twitter/X app bearer tokens (22 A's then the secret).
    Rule {
        class: Secret,
        name: "twitter_bearer_token",
        matcher: keyed(Raw, &["AAAAAAAAAAAAAAAAAAAAAA"], r#"\bA{22}[A-Za-z0-9%]{20,}"#),
        hits: examples![concat!("AAAAAAAAAAA", "AAAAAAAAAAA", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7h"), concat!("Bearer AAAAAAAAAAA", "AAAAAAAAAAA", "%3D", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d")],
        misses: examples!["AAAAAAAAAAAAAAAAAAAAAA", "grade AAA bonds"],
        ..BASE
    },
    // Firebase Cloud Messaging legacy server keys.
    Rule {
        class: Secret,
        name: "firebase_fcm_key",
        matcher: keyed(Raw, &["AAAA"], r#"\bAAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("AAAA", "bCdEfGh", ":APA91b", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL"), concat!("server_key AAAA", "XyZ1234", ":APA91b", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ")],
        misses: examples!["APA91b registration ids", "AAAA record for the host"],
        ..BASE
    },
    // AI service keys: Groq, xAI, Replicate, OpenRouter, Perplexity, LangSmith,
    // Tavily, Pinecone, Langfuse.
    Rule {
        class: Secret,
        name: "ai_service_key",
        matcher: keyed(Raw, &["gsk_", "lsv2_pt_", "lsv2_sk_", "pcsk_", "pplx-", "r8_", "sk-lf-", "sk-or-v1-", "tvly-", "xai-"], r#"\bpcsk_[A-Za-z0-9]{5,}_[A-Za-z0-9]{40,}|\bsk-lf-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\bgsk_[A-Za-z0-9]{20,}|\bxai-[A-Za-z0-9]{20,}|\br8_[A-Za-z0-9]{37}\b|\bsk-or-v1-[a-f0-9]{20,}|\bpplx-[A-Za-z0-9]{20,}|\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|\btvly-[A-Za-z0-9_-]{20,}"#),
        hits: examples![concat!("gs", "k_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9"), concat!("sk-", "or-v1-", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("PINECONE_API_KEY=pc", "sk_", "3Xk9vQ", "_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7h"), concat!("sk-", "lf-", "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"), concat!("ls", "v2_pt_", "0123456789abcdef0123456789abcdef", "_", "0123456789")],
        misses: examples!["gsk_ groq keys", "xai-grok model"],
        ..BASE
    },
    // Package registry tokens: RubyGems, Clojars, Artifactory, NuGet, Docker Hub,
    // crates.io.
    Rule {
        class: Secret,
        name: "package_registry_token",
        matcher: keyed(Raw, &["AKCp", "CLOJARS_", "cio", "cmVmd", "dckr_oat_", "dckr_pat_", "oy2", "rubygems_"], r#"\bcmVmd[A-Za-z0-9]{59}\b|\brubygems_[a-f0-9]{20,}\b|\bCLOJARS_[a-z0-9]{20,}|\bAKCp[A-Za-z0-9]{20,}|\boy2[a-z0-9]{20,}\b|\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}|\bcio[A-Za-z0-9]{32}\b"#),
        hits: examples![concat!("ruby", "gems_", "0123456789abcdef0123456789abcdef0123456789abcdef"), concat!("dckr", "_pat_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8"), concat!("cm", "Vmd", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2p"), concat!("AK", "Cp", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW")],
        misses: examples!["rubygems_api_key setting", "dckr_pat_ tokens"],
        ..BASE
    },
    // Other SaaS tokens with a distinctive prefix: 1Password, Dynatrace,
    // EasyPost, Duffel, Frame.io, Flutterwave, Prefect, ReadMe, Scalingo,
    // Brevo, Shippo, Typeform, OpenShift, Mapbox secret, Sourcegraph, Contentful,
    // Buildkite, Netlify, Render, Intra42, MaxMind.
    Rule {
        class: Secret,
        name: "saas_api_token",
        matcher: keyed(Raw, &["_mmk", "A3-", "CFPAT-", "EZAK", "EZTK", "FLWSECK", "bkua_", "dt0c01.", "duffel_live_", "duffel_test_", "fio-u-", "nfp_", "ops_eyJ", "pnu_", "rdme_", "rnd_", "s-s4t2af-", "s-s4t2ud-", "sgp_", "sha256~", "tk-us-", "xkeysib-", "shippo_live_", "shippo_test_", "tfp_", "sk.eyJ"], r#"\bops_eyJ[A-Za-z0-9+/]{20,}|\bA3-[A-Z0-9]{6}-[A-Z0-9-]{20,}|\bdt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20,}|\bEZ[AT]K[A-Za-z0-9]{20,}|\bduffel_(?:test|live)_[A-Za-z0-9_=-]{20,}|\bfio-u-[A-Za-z0-9_=-]{20,}|\bFLWSECK(?:_TEST)?-[A-Za-z0-9]{32}|\bpnu_[A-Za-z0-9]{36}|\brdme_[a-z0-9]{20,}|\btk-us-[A-Za-z0-9_-]{20,}|\bxkeysib-[a-f0-9]{20,}-[A-Za-z0-9]{16}|\bshippo_(?:live|test)_[a-fA-F0-9]{20,}|\btfp_[A-Za-z0-9_.=-]{20,}|\bsha256~[A-Za-z0-9_-]{20,}|\bsk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}|\bsgp_[a-fA-F0-9]{16}_[a-fA-F0-9]{20,}|\bsgp_[a-fA-F0-9]{20,}|\bCFPAT-[A-Za-z0-9_-]{20,}|\bbkua_[a-f0-9]{20,}|\bnfp_[A-Za-z0-9]{36}|\brnd_[A-Za-z0-9]{32}|\bs-s4t2(?:ud|af)-[a-f0-9]{20,}|\b[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk\b"#),
        hits: examples![concat!("dt0c", "01.", "aB3dE5fG7hJ9kL1mN2pQ4rS6", ".", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJ9kL1mN2pQ4rS6"), concat!("xkey", "sib-", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "-", "aB3dE5fG7hJ9kL1m"), concat!("sk.", "eyJ1IjoiYSJ9", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7h", ".", "aB3dE5fG7hJ9kL1mN2pQ4r")],
        misses: examples!["sha256~ is an openshift prefix", "the dt0c01 prefix"],
        ..BASE
    },
    // Further tokens with a distinctive structure, from the gitleaks and
    // trufflehog catalogues of 2026: Tailscale, CircleCI, Harness,
    // Infracost, Octopus Deploy, ClickHouse Cloud, SettleMint, PostHog
    // personal keys, Resend, Brevo SMTP, Plaid access tokens, and Azure's
    // identifiable keys (84 characters, "JQQJ9" at offset 52).
    Rule {
        class: Secret,
        name: "service_token",
        matcher: keyed(Raw, &["4b1d", "API-", "CCIPAT_", "JQQJ9", "access-development-", "access-production-", "access-sandbox-", "ico-", "pat.", "phx_", "re_", "sat.", "sm_aat_", "sm_pat_", "sm_sat_", "tskey-", "xsmtpsib-"], r#"\btskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}|\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}\b|\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b|\bico-[A-Za-z0-9]{32}\b|\bAPI-[A-Z0-9]{26}\b|\b4b1d[A-Za-z0-9]{38}\b|\bsm_(?:aat|pat|sat)_[A-Za-z0-9]{16}\b|\bphx_[A-Za-z0-9]{40,}|\bre_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}\b|\bxsmtpsib-[a-f0-9]{64}-[A-Za-z0-9]{16}\b|\baccess-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[A-Za-z0-9]{52}JQQJ9[A-Za-z0-9]{27}\b"#),
        hits: examples![
            concat!("ts", "key-auth-", "kX9vQ2mpL0CNTRL", "-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY"),
            concat!("CCI", "PAT_", "aB3dE5fG7hJ9kL1mN2pQ4r", "_", "0123456789abcdef0123456789abcdef01234567"),
            concat!("pa", "t.", "aB3dE5fG7hJ9kL1mN2pQ4r", ".", "aB3dE5fG7hJ9kL1mN2pQ4rS6", ".", "aB3dE5fG7hJ9kL1mN2pQ"),
            concat!("ic", "o-", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY"),
            concat!("AP", "I-", "ABCDEFGHIJKLMNOPQRSTUVWX12"),
            concat!("4b", "1d", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC"),
            concat!("sm_", "pat_", "aB3dE5fG7hJ9kL1m"),
            concat!("ph", "x_", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6d"),
            concat!("RESEND_API_KEY=r", "e_", "aB3dE5fG", "_", "aB3dE5fG7hJ9kL1mN2pQ4rS6"),
            concat!("xsmtp", "sib-", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "-", "aB3dE5fG7hJ9kL1m"),
            concat!("access-", "sandbox-", "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
            concat!("aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4bC6daB3dE5fG7hJk", "JQQJ9", "9aB3dE5fG7hJ9kL1mN2pQ4rS6tU"),
        ],
        misses: examples![
            "tskey-auth- keys come from the admin console",
            "the API-GATEWAY handles REST API-first design",
            "pat.ch and sat.com are hosts",
            "store_re_entry_flag and access-sandbox-id",
            "4b1d is a hex prefix",
        ],
        ..BASE
    },
    // A Wi-Fi QR code's text (`WIFI:T:WPA;S:<ssid>;P:<password>;;`, any
    // field order): the network's password.
    Rule {
        class: Secret,
        name: "wifi_password",
        matcher: keyed(Raw, &["wifi:"], r#"(?i)\bWIFI:(?:[A-Z]:(?:[^;\\]|\\.)*;)*?P:([^;\\$<{*\s](?:[^;\\]|\\.){3,})"#),
        hits: examples![concat!("WIFI:T:WPA;S:HomeNet;P:", "Xk9vQ2", "mpL0;;"), concat!("wifi:S:Office 5G;T:WPA2;P:", "correcthorse", "battery;H:false;;")],
        misses: examples!["WIFI:T:nopass;S:Guest;;", "WIFI:T:WPA;S:HomeNet;P:${WIFI_PASSWORD};;"],
        ..BASE
    },
    // `"auth": "<base64 of user:password>"`, as in a Docker `config.json`
    // `auths` block (or a note labelled `auth`).
    Rule {
        class: Secret,
        name: "encoded_basic_auth",
        matcher: Detect(encoded_basic_auth),
        hits: examples![
            concat!(r#"{"auths": {"https://index.docker.io/v1/": {"auth": "ZGVwbG95Ol"#, r#"RyMHViNGRvci00Mg=="}}}"#),
            concat!("auth: ZGVwbG95Ol", "RyMHViNGRvci00Mg"),
            // SMTP AUTH PLAIN: NUL alice NUL a real-looking password.
            concat!("C: AUTH PLAIN AGFsaWNl", "AFpxNyF3WDJwTG05Iw=="),
        ],
        misses: examples![
            // AUTH PLAIN with the placeholder "password".
            "AUTH PLAIN AGFsaWNlAHBhc3N3b3Jk",
            // "user:password" and "user:<token>": placeholders.
            r#"{"auths": {"ghcr.io": {"auth": "dXNlcjpwYXNzd29yZA=="}}}"#,
            r#""auth": "b2F1dGgy""#,
            "auth: required",
        ],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "webhook_url",
        matcher: keyed(
            Raw,
            &["webhook", "hooks.zapier"],
            r#"(?i)(?:outlook\.office(?:365)?\.com/webhook|webhook\.office\.com/webhookb2|hooks\.zapier\.com/hooks/catch)/[A-Za-z0-9@/_-]{20,}"#
        ),
        hits: examples![
            concat!("https://outlook.office.com/web", "hook/b65400a2-f825-45d5-a678-2cf978828fc5@9bc44484/IncomingWebhook/249cc779"),
            concat!("hooks.zapier.com/hooks/", "catch/1234567/abcdefghijklmnop/"),
        ],
        misses: examples!["post alerts via the Teams webhook", "zapier hooks are configured in the UI"],
        ..BASE
    },
    Rule {
        class: Secret,
        name: "config_value_credential",
        matcher: checked(
            &["value"],
            r#"(?i)\bkey\s*=\s*["'][^"']*(?:password|passwd|secret|token|apikey|api_key|connectionstring)[^"']*["']\s+value\s*=\s*["']([^"']+)"#
        ),
        hits: examples![
            r#"<add key="ClearTextPassword" value="vzkxeo-ifawqx-9029" />"#,
            r#"<add key="ApiToken" value="Xk9vQ2mpL0rT" />"#,
        ],
        misses: examples![r#"<add key="Timeout" value="30" />"#, r#"<add key="Password" value="${DB_PASSWORD}" />"#],
        ..BASE
    },
];

/// Whether an `auth` key holds base64 that decodes to `user:password` with
/// a credential-looking password.
fn encoded_basic_auth(v: &Views) -> bool {
    // Most strings have no "auth" at all: one fast substring search.
    if !v.lower.contains("auth") {
        return false;
    }
    let s = v.raw.as_bytes();
    let mut from = 0;
    while let Some(p) = find_ascii_ci(&s[from..], b"auth") {
        let at = from + p;
        from = at + 4;
        if at > 0 && s[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut i = at + 4;
        let skip = |i: &mut usize, set: &[u8]| {
            while s.get(*i).is_some_and(|b| set.contains(b)) {
                *i += 1;
            }
        };
        skip(&mut i, b"\"'");
        skip(&mut i, b" \t");
        // SMTP/IMAP `AUTH PLAIN <base64 of authzid NUL user NUL password>`.
        if s.len() > i + 6 && s[i..i + 5].eq_ignore_ascii_case(b"plain") && s[i + 5] == b' ' {
            let start = i + 6;
            let end = start
                + s[start..]
                    .iter()
                    .take_while(|&&b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
                    .count();
            if let Ok(decoded) = STANDARD.decode(&s[start..end]) {
                let parts: Vec<&[u8]> = decoded.split(|&b| b == 0).collect();
                if parts.len() == 3
                    && !parts[1].is_empty()
                    && parts[2].iter().all(u8::is_ascii_graphic)
                    && looks_like_credential(parts[2])
                {
                    return true;
                }
            }
            continue;
        }
        if !matches!(s.get(i), Some(b':' | b'=')) {
            continue;
        }
        i += 1;
        skip(&mut i, b" \t\"'");
        let start = i;
        while s
            .get(i)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        {
            i += 1;
        }
        let body = &s[start..i];
        if body.len() < 8 {
            continue;
        }
        let Ok(decoded) = STANDARD_NO_PAD.decode(body) else {
            continue;
        };
        let Some(colon) = decoded.iter().position(|&b| b == b':') else {
            continue;
        };
        let (user, pass) = (&decoded[..colon], &decoded[colon + 1..]);
        let printable = |b: &[u8]| b.iter().all(|c| c.is_ascii_graphic());
        if !user.is_empty() && printable(user) && printable(pass) && looks_like_credential(pass) {
            return true;
        }
    }
    false
}

fn find_ascii_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::super::{all, Rule};
    use crate::core::json::Json;
    use crate::core::safety::scan;

    fn fires(rule: &Rule, text: &str) -> bool {
        scan(&Json::from(text)).iter().any(|f| f.rule == rule.name)
    }

    /// Every secret rule (this file and `crypto_keys.rs`) flags its own
    /// hits and none of its misses.
    #[test]
    fn secret_rules_meet_their_examples() {
        let mut failures = Vec::new();
        for rule in all().filter(|r| r.class == crate::core::safety::FindingClass::Secret) {
            if rule.hits.len() < 2 || rule.misses.len() < 2 {
                failures.push(format!("{}: needs 2+ hits and misses", rule.name));
            }
            for hit in rule.hits {
                if !fires(rule, hit) {
                    failures.push(format!("{}: missed hit {hit:?}", rule.name));
                }
            }
            for miss in rule.misses {
                if fires(rule, miss) {
                    failures.push(format!("{}: fired on miss {miss:?}", rule.name));
                }
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }
}

#[cfg(test)]
mod benign {
    use crate::core::json::Json;
    use crate::core::safety::{scan, FindingClass};

    /// Agent-state text that mentions keys, hashes and addresses without
    /// holding a secret: no secret finding.
    #[test]
    fn benign_texts_have_no_secret_findings() {
        for text in [
            "password reset flow for the dashboard",
            "token budget: 900",
            "max_tokens=4096",
            "rotate the API key monthly",
            "secret: none",
            "api_key: ${OPENAI_API_KEY}",
            "Credentials are read from ~/.aws/credentials by the SDK",
            "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "commit 3b18e512dba79e4c8300dd08aeb37f8e728b8dad fixed it",
            "request id 123e4567-e89b-12d3-a456-426614174000",
            "tx 0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
            "block hash 0x88e96d4537bea4d9c05d12549907b32561d3bf31f45aae734cdc119f13406cb6",
            "send to 0x742d35Cc6634C0532925a3b844Bc454e4438f44e",
            "Solana address 9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
            "BTC bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq and 1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
            "ed25519 public key 3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            concat!(
                "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoC",
                "u1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
            ),
            "integrity sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
            "we use sk-learn for the baseline model",
            "Please make sure you review every detail of the plan before the final release, then add a note.",
            "The team will learn about the new process and share the report with each other next week again.",
            "The quick brown fox jumps over the lazy dog while the young girl watches from the window above.",
            "password policy: minimum 12 characters, rotate every 90 days",
            "store password SHA256 hashes only",
            "user admin password reset requested by the owner",
            "the login page / dashboard route is cached",
            "curl -u $USER:$TOKEN https://api.example.com",
            "Passwort vergessen? Link zum Zurücksetzen senden",
            "Ask for the mot de passe in person",
            "private key handling: use the KMS",
            "public key: 0x04a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e9f0",
            "API key rotation is scheduled-monthly",
            "price is $5 or $6 and $2 off",
            "SKU SK12 moved to aisle 3",
            "key-value cache with 10:30 expiry",
            "https://example.com/search?q=token&page=2",
            "https://github.com/org/repo/pull/42?tab=files",
        ] {
            let secrets: Vec<_> = scan(&Json::from(text))
                .into_iter()
                .filter(|f| f.class == FindingClass::Secret)
                .map(|f| f.rule)
                .collect();
            assert!(secrets.is_empty(), "{text:?}: {secrets:?}");
        }
    }
}
