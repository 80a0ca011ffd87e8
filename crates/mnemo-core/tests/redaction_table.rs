//! Redaction, both directions, as one table: each row is a text and what redaction must make of it.
//! Rows whose expectation equals the input are texts that must stay as they are (code that names
//! tokens, prose about passwords, ports and paths); the others hide a credential and nothing else.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use mnemo_core::redaction::redact_secrets;

/// `(input, expected)`; `expected == input` means the text must stay untouched.
const TABLE: &[(&str, &str)] = &[
    // Shell: environment assignments.
    ("PGPASSWORD=hunter2hunter2 psql -h db", "PGPASSWORD=[redacted] psql -h db"),
    ("export DB_PASS=hunter2hunter2", "export DB_PASS=[redacted]"),
    ("SMTP_PASS='x y' ./send.sh", "SMTP_PASS='[redacted]' ./send.sh"),
    ("REDIS_PASSWORD=abc123 redis-server", "REDIS_PASSWORD=[redacted] redis-server"),
    ("MYSQL_PWD=s3cr3t mysql -u root", "MYSQL_PWD=[redacted] mysql -u root"),
    ("export GITHUB_TOKEN=gho_abc", "export GITHUB_TOKEN=[redacted]"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI aws s3 ls", "AWS_SECRET_ACCESS_KEY=[redacted] aws s3 ls"),
    ("echo $DB_PASSWORD | wc -c", "echo $DB_PASSWORD | wc -c"),
    // Shell: tools that take a password as a short flag.
    ("sshpass -p 'hunter2hunter2' ssh admin@10.0.0.5", "sshpass -p '[redacted]' ssh admin@10.0.0.5"),
    ("sshpass -p hunter2 scp a.txt host:/tmp", "sshpass -p [redacted] scp a.txt host:/tmp"),
    ("redis-cli -a hunter2hunter2 ping", "redis-cli -a [redacted] ping"),
    ("redis-cli -h cache -p 6379 -a 's3cret' info", "redis-cli -h cache -p 6379 -a '[redacted]' info"),
    ("curl -u admin:hunter2 https://api.test/x", "curl -u admin:[redacted] https://api.test/x"),
    ("curl --user bob:s3cret -X POST https://a.test", "curl --user bob:[redacted] -X POST https://a.test"),
    ("curl -s -u 'ci:tok en' https://a.test", "curl -s -u 'ci:[redacted]' https://a.test"),
    ("docker login -u me -p hunter2 registry.test", "docker login -u me -p [redacted] registry.test"),
    ("mysql -u root -pS3cret shop", "mysql -u root -p[redacted] shop"),
    ("docker login --password hunter2 reg", "docker login --password [redacted] reg"),
    ("tool --api-key abc123", "tool --api-key [redacted]"),
    // Shell: what stays.
    ("curl -u admin https://api.test/x", "curl -u admin https://api.test/x"),
    ("curl -u $USER:$PASS https://api.test", "curl -u $USER:$PASS https://api.test"),
    ("redis-cli -p 6379 ping", "redis-cli -p 6379 ping"),
    ("ssh -p 2222 admin@host", "ssh -p 2222 admin@host"),
    ("docker run -p 8080:80 nginx", "docker run -p 8080:80 nginx"),
    ("mkdir -p src/auth && ls -a", "mkdir -p src/auth && ls -a"),
    ("git commit -a -m 'fix token parsing'", "git commit -a -m 'fix token parsing'"),
    ("sshpass -f ~/.pw ssh host", "sshpass -f ~/.pw ssh host"),
    ("psql --no-password shop", "psql --no-password shop"),
    ("tool --password $DB_PASSWORD", "tool --password $DB_PASSWORD"),
    ("PWD=/home/me OLDPWD=/tmp", "PWD=/home/me OLDPWD=/tmp"),
    ("sort -u names.txt | uniq -c", "sort -u names.txt | uniq -c"),
    ("ps -u root -o pid", "ps -u root -o pid"),
    // URLs.
    ("postgres://app:s3cr3t@db:5432/prod", "postgres://app:[redacted]@db:5432/prod"),
    ("redis://:hunter2@cache:6379/0", "redis://:[redacted]@cache:6379/0"),
    ("https://x.test/cb?code=1&client_secret=abc", "https://x.test/cb?code=1&client_secret=[redacted]"),
    ("https://x.test/a?api_key=zzz#top", "https://x.test/a?api_key=[redacted]#top"),
    ("mongodb+srv://u:p4ss@cluster0.test/db", "mongodb+srv://u:[redacted]@cluster0.test/db"),
    ("see https://example.com/docs?page=2", "see https://example.com/docs?page=2"),
    ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
    ("http://localhost:8080/health", "http://localhost:8080/health"),
    ("https://x.test/a?token_count=5", "https://x.test/a?token_count=5"),
    // Prose.
    ("the db password is hunter2hunter2", "the db password is [redacted]"),
    ("The database password is `pa55 word`.", "The database password is `[redacted]`."),
    ("my password is hunter2.", "my password is [redacted]."),
    ("the admin password for staging is Tr0ub4dor", "the admin password for staging is [redacted]"),
    ("I changed my password to hunter3 yesterday", "I changed my password to [redacted] yesterday"),
    ("the api key is abc123xyz", "the api key is [redacted]"),
    ("the password policy requires 12 characters", "the password policy requires 12 characters"),
    ("the password is incorrect, try again", "the password is incorrect, try again"),
    ("Password is required.", "Password is required."),
    ("the token is counted once", "the token is counted once"),
    ("the access token is expired", "the access token is expired"),
    ("we rotate the password every month", "we rotate the password every month"),
    ("a token bucket limits the rate", "a token bucket limits the rate"),
    // Code: identifiers that name tokens and passwords are not secrets.
    ("let token = issue_token(&user);", "let token = issue_token(&user);"),
    ("let token = Token::new(claims);", "let token = Token::new(claims);"),
    ("let token = Token::parse(raw)?;", "let token = Token::parse(raw)?;"),
    ("const token = await getToken();", "const token = await getToken();"),
    ("let password = hasher.hash(input);", "let password = hasher.hash(input);"),
    ("let api_key = env::var(\"API_KEY\")?;", "let api_key = env::var(\"API_KEY\")?;"),
    ("token = request.headers.get('x-token')", "token = request.headers.get('x-token')"),
    ("fn verify(token: &str) -> bool", "fn verify(token: &str) -> bool"),
    ("pub struct Claims { token: String, }", "pub struct Claims { token: String, }"),
    ("password: Option<String>,", "password: Option<String>,"),
    ("secret: Vec<u8>,", "secret: Vec<u8>,"),
    ("if token == other {}", "if token == other {}"),
    ("token = None", "token = None"),
    ("let secret = self.secret.clone();", "let secret = self.secret.clone();"),
    ("password = getpass.getpass()", "password = getpass.getpass()"),
    // Code: literal secrets are still secrets.
    ("let token = \"abc123\";", "let token = \"[redacted]\";"),
    ("password = 'hunter2'", "password = '[redacted]'"),
    ("const apiKey = \"sk-live-abcdefgh\";", "const apiKey = \"[redacted]\";"),
    ("token: hunter2hunter2", "token: [redacted]"),
    // Free-standing tokens.
    ("key sk-ant-abcdefgh123 used", "key [redacted] used"),
    ("ghp_abcdefghijklmnopqrstuv", "[redacted]"),
    ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer [redacted]"),
];

#[test]
fn redaction_table_hides_credentials_and_keeps_everything_else() {
    assert!(TABLE.len() >= 60, "the table holds {} rows, at least 60 are expected", TABLE.len());
    let kept = TABLE.iter().filter(|(input, expected)| input == expected).count();
    assert!(kept >= 25 && TABLE.len() - kept >= 25, "both directions are covered: {kept} kept rows");
    let mut failures = Vec::new();
    for (input, expected) in TABLE {
        let got = redact_secrets(input);
        if got != *expected {
            failures.push(format!("  {input:?}\n    expected {expected:?}\n    got      {got:?}"));
        }
        // Redacting twice changes nothing more.
        assert_eq!(redact_secrets(&got), got, "redaction of {input:?} is not idempotent");
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows differ:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}
