//! Syntax highlighting of fenced code blocks: a small lexer per line (keywords, types, strings,
//! comments, numbers) for the languages answers use most. Written here rather than taken from
//! syntect or tree-sitter: the release binary has no room under its ~20 MiB budget for their
//! grammars and regex engines, and loading a syntax set would cost start-up time; what a
//! terminal needs is the few token classes below, which a lexer this size gets right for
//! ordinary code. Block comments and triple-quoted strings carry over from line to line.

use ratatui::text::Span;

use crate::theme::Theme;

/// What a piece of code is, for its style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    Plain,
    Keyword,
    Type,
    String,
    Comment,
    Number,
}

/// The languages highlighted; fences name them by any of [`language`]'s aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    Go,
    C,
    Java,
    Shell,
    Json,
    Toml,
    Yaml,
}

/// The language a fence's info string names (its first word, any case), if highlighted.
pub fn language(info: &str) -> Option<Lang> {
    let word = info.split_whitespace().next()?.to_ascii_lowercase();
    let word = word.trim_matches(|c| c == '{' || c == '}' || c == '.');
    Some(match word {
        "rust" | "rs" => Lang::Rust,
        "python" | "py" | "python3" => Lang::Python,
        "javascript" | "js" | "jsx" | "mjs" | "typescript" | "ts" | "tsx" => Lang::JavaScript,
        "go" | "golang" => Lang::Go,
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "cxx" => Lang::C,
        "java" | "kotlin" | "kt" | "cs" | "csharp" | "c#" => Lang::Java,
        "sh" | "bash" | "shell" | "zsh" | "console" | "shellsession" => Lang::Shell,
        "json" | "jsonc" | "json5" => Lang::Json,
        "toml" => Lang::Toml,
        "yaml" | "yml" => Lang::Yaml,
        _ => return None,
    })
}

// The word lists are space-separated strings: one look-up per identifier of a line that is
// being drawn is cheap, and they stay readable tables.
impl Lang {
    fn keywords(self) -> &'static str {
        match self {
            Lang::Rust => {
                "as async await break const continue crate dyn else enum extern false fn for if \
                 impl in let loop match mod move mut pub ref return self Self static struct \
                 super trait true type unsafe use where while"
            }
            Lang::Python => {
                "and as assert async await break class continue def del elif else except False \
                 finally for from global if import in is lambda None nonlocal not or pass raise \
                 return self True try while with yield"
            }
            Lang::JavaScript => {
                "async await break case catch class const continue default delete do else \
                 export extends false finally for from function if implements import in \
                 instanceof interface let new null of return static super switch this throw \
                 true try type typeof undefined var void while yield"
            }
            Lang::Go => {
                "break case chan const continue default defer else fallthrough false for func \
                 go goto if import interface map nil package range return select struct switch \
                 true type var"
            }
            Lang::C => {
                "auto break case class const constexpr continue default delete do else enum \
                 extern false for goto if include define inline namespace new nullptr private \
                 protected public return sizeof static struct switch template this true typedef \
                 typename union using virtual volatile while"
            }
            Lang::Java => {
                "abstract break case catch class const continue default do else enum extends \
                 false final finally for fun if implements import interface namespace new null \
                 override package private protected public return static super switch this \
                 throw throws true try using val var void when while"
            }
            Lang::Shell => {
                "case do done elif else esac exit export fi for function if in local return \
                 then until while"
            }
            Lang::Json | Lang::Toml | Lang::Yaml => "true false null yes no",
        }
    }

    fn types(self) -> &'static str {
        match self {
            Lang::Rust => {
                "bool char f32 f64 i8 i16 i32 i64 i128 isize str u8 u16 u32 u64 u128 usize"
            }
            Lang::Python => "bool bytes dict float int list object set str tuple",
            Lang::JavaScript => "any boolean never number string unknown",
            Lang::Go => {
                "bool byte error float32 float64 int int8 int16 int32 int64 rune string uint \
                 uint8 uint16 uint32 uint64"
            }
            Lang::C | Lang::Java => {
                "bool boolean byte char double float int long short signed size_t unsigned void"
            }
            Lang::Shell | Lang::Json | Lang::Toml | Lang::Yaml => "",
        }
    }

    /// The line comment's opening, if the language has one.
    fn line_comment(self) -> Option<&'static str> {
        match self {
            Lang::Rust | Lang::JavaScript | Lang::Go | Lang::C | Lang::Java => Some("//"),
            Lang::Python | Lang::Shell | Lang::Toml | Lang::Yaml => Some("#"),
            Lang::Json => None,
        }
    }

    fn block_comments(self) -> bool {
        matches!(
            self,
            Lang::Rust | Lang::JavaScript | Lang::Go | Lang::C | Lang::Java
        )
    }

    /// Capitalised identifiers name types (Rust, Go, Java, C++, TypeScript conventions).
    fn capitalised_types(self) -> bool {
        matches!(
            self,
            Lang::Rust | Lang::JavaScript | Lang::Go | Lang::C | Lang::Java
        )
    }
}

/// A construct that continues onto the next line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    BlockComment,
    /// A Python triple-quoted string, by its quote character.
    TripleQuote(char),
}

/// Highlights one code block line by line.
#[derive(Debug, Clone)]
pub struct Highlighter {
    lang: Lang,
    open: Option<Open>,
}

impl Highlighter {
    pub fn new(lang: Lang) -> Highlighter {
        Highlighter { lang, open: None }
    }

    /// The tokens of the next line of the block, with their text.
    pub fn tokens(&mut self, line: &str) -> Vec<(Token, String)> {
        let chars: Vec<char> = line.chars().collect();
        let mut out: Vec<(Token, String)> = Vec::new();
        let mut push = |token: Token, text: &[char]| {
            if text.is_empty() {
                return;
            }
            match out.last_mut() {
                Some((last, existing)) if *last == token => existing.extend(text),
                _ => out.push((token, text.iter().collect())),
            }
        };
        let mut i = 0;
        while i < chars.len() {
            if let Some(open) = self.open {
                let (end, closed) = match open {
                    Open::BlockComment => find(&chars, i, &['*', '/']),
                    Open::TripleQuote(q) => find(&chars, i, &[q, q, q]),
                };
                let token = match open {
                    Open::BlockComment => Token::Comment,
                    Open::TripleQuote(_) => Token::String,
                };
                push(token, &chars[i..end]);
                i = end;
                if closed {
                    self.open = None;
                }
                continue;
            }
            let c = chars[i];
            let rest = &chars[i..];
            if let Some(opening) = self.lang.line_comment()
                && starts_with(rest, opening)
                && (opening != "#" || self.hash_starts_comment(&chars, i))
            {
                push(Token::Comment, rest);
                break;
            }
            if self.lang.block_comments() && starts_with(rest, "/*") {
                self.open = Some(Open::BlockComment);
                push(Token::Comment, &rest[..2]);
                i += 2;
                continue;
            }
            if self.lang == Lang::Python
                && (starts_with(rest, "\"\"\"") || starts_with(rest, "'''"))
            {
                self.open = Some(Open::TripleQuote(c));
                push(Token::String, &rest[..3]);
                i += 3;
                continue;
            }
            if let Some(len) = self.string_len(rest) {
                push(Token::String, &rest[..len]);
                i += len;
                continue;
            }
            if c.is_ascii_digit() {
                let len = rest
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '.')
                    .count();
                push(Token::Number, &rest[..len]);
                i += len;
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let len = rest
                    .iter()
                    .take_while(|c| c.is_alphanumeric() || **c == '_')
                    .count();
                let word: String = rest[..len].iter().collect();
                push(self.word_token(&word, &rest[len..]), &rest[..len]);
                i += len;
                continue;
            }
            push(Token::Plain, &rest[..1]);
            i += 1;
        }
        out
    }

    /// `#` opens a comment at the start or after a space (`$#`, `a#b` and `${#x}` are not
    /// comments in shells; YAML and TOML need the space too).
    fn hash_starts_comment(&self, chars: &[char], i: usize) -> bool {
        i == 0 || chars[i - 1].is_whitespace() || self.lang == Lang::Python
    }

    /// The length of the string literal `rest` starts with (to its closing quote, or the line's
    /// end), if it starts one.
    fn string_len(&self, rest: &[char]) -> Option<usize> {
        let quote = rest[0];
        let quotes: &[char] = match self.lang {
            Lang::Rust | Lang::Json | Lang::C | Lang::Java => &['"'],
            Lang::Go => &['"', '`'],
            Lang::JavaScript => &['"', '\'', '`'],
            Lang::Python | Lang::Shell | Lang::Toml | Lang::Yaml => &['"', '\''],
        };
        if quote == '\'' && matches!(self.lang, Lang::Rust | Lang::C | Lang::Java) {
            // A character literal ('a', '\n'); in Rust a lone quote is a lifetime.
            let len = match rest.get(1) {
                Some('\\') => rest.iter().skip(2).position(|c| *c == '\'')? + 3,
                Some(_) if rest.get(2) == Some(&'\'') => 3,
                _ => return None,
            };
            return Some(len);
        }
        if !quotes.contains(&quote) {
            return None;
        }
        let mut j = 1;
        while j < rest.len() {
            match rest[j] {
                '\\' if quote != '`' && !(self.lang == Lang::Shell && quote == '\'') => j += 2,
                c if c == quote => return Some(j + 1),
                _ => j += 1,
            }
        }
        Some(rest.len())
    }

    fn word_token(&self, word: &str, after: &[char]) -> Token {
        let listed = |list: &str| list.split_ascii_whitespace().any(|w| w == word);
        if listed(self.lang.keywords()) {
            return Token::Keyword;
        }
        if listed(self.lang.types()) {
            return Token::Type;
        }
        // A key (`name:` in YAML, `name =` in TOML) reads as the language's keyword.
        let next = after.iter().find(|c| !c.is_whitespace());
        match self.lang {
            Lang::Yaml if next == Some(&':') => return Token::Keyword,
            Lang::Toml if next == Some(&'=') => return Token::Keyword,
            _ => {}
        }
        if self.lang.capitalised_types()
            && word.starts_with(|c: char| c.is_uppercase())
            && word.chars().any(|c| c.is_lowercase())
        {
            return Token::Type;
        }
        Token::Plain
    }

    /// The next line as styled spans.
    pub fn line(&mut self, line: &str, theme: &Theme) -> Vec<Span<'static>> {
        self.tokens(line)
            .into_iter()
            .map(|(token, text)| Span::styled(text, theme.token(token)))
            .collect()
    }
}

fn starts_with(chars: &[char], prefix: &str) -> bool {
    prefix
        .chars()
        .enumerate()
        .all(|(n, p)| chars.get(n) == Some(&p))
}

/// The end of the run from `from` up to and including `closing` (and whether it was found).
fn find(chars: &[char], from: usize, closing: &[char]) -> (usize, bool) {
    let n = closing.len();
    (from..chars.len())
        .find(|&i| chars[i..].starts_with(closing))
        .map_or((chars.len(), false), |i| (i + n, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(lang: Lang, lines: &[&str]) -> Vec<Vec<(Token, String)>> {
        let mut highlighter = Highlighter::new(lang);
        lines.iter().map(|line| highlighter.tokens(line)).collect()
    }

    fn of(kind: Token, line: &[(Token, String)]) -> Vec<String> {
        line.iter()
            .filter(|(t, _)| *t == kind)
            .map(|(_, s)| s.trim().to_string())
            .collect()
    }

    #[test]
    fn fences_name_languages_by_alias() {
        assert_eq!(language("rust"), Some(Lang::Rust));
        assert_eq!(language("RS ignore"), Some(Lang::Rust));
        assert_eq!(language("tsx"), Some(Lang::JavaScript));
        assert_eq!(language("{.python}"), Some(Lang::Python));
        assert_eq!(language("brainfuck"), None);
        assert_eq!(language(""), None);
    }

    #[test]
    fn rust_keywords_types_strings_numbers_and_comments() {
        let lines = tokens(
            Lang::Rust,
            &["fn main() -> Result<u32, Error> { let s = \"a \\\" b\"; 42 } // done"],
        );
        let line = &lines[0];
        assert_eq!(of(Token::Keyword, line), ["fn", "let"]);
        assert_eq!(of(Token::Type, line), ["Result", "u32", "Error"]);
        assert_eq!(of(Token::String, line), ["\"a \\\" b\""]);
        assert_eq!(of(Token::Number, line), ["42"]);
        assert_eq!(of(Token::Comment, line), ["// done"]);
        // The pieces are the line, nothing lost or added.
        let text: String = line.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(
            text,
            "fn main() -> Result<u32, Error> { let s = \"a \\\" b\"; 42 } // done"
        );
    }

    #[test]
    fn lifetimes_are_not_strings_but_chars_are() {
        let lines = tokens(Lang::Rust, &["fn f<'a>(x: &'a str) -> char { 'x' }"]);
        assert_eq!(of(Token::String, &lines[0]), ["'x'"]);
    }

    #[test]
    fn block_comments_and_triple_quotes_span_lines() {
        let lines = tokens(Lang::C, &["int a; /* one", "two", "end */ return a;"]);
        assert_eq!(of(Token::Comment, &lines[0]), ["/* one"]);
        assert_eq!(of(Token::Comment, &lines[1]), ["two"]);
        assert_eq!(of(Token::Comment, &lines[2]), ["end */"]);
        assert_eq!(of(Token::Keyword, &lines[2]), ["return"]);
        let lines = tokens(
            Lang::Python,
            &["x = \"\"\"doc", "still\"\"\" if y else None"],
        );
        assert_eq!(of(Token::String, &lines[1]), ["still\"\"\""]);
        assert_eq!(of(Token::Keyword, &lines[1]), ["if", "else", "None"]);
    }

    #[test]
    fn shell_hashes_and_config_keys() {
        let lines = tokens(Lang::Shell, &["echo $# 'it''s' # note"]);
        assert_eq!(of(Token::Comment, &lines[0]), ["# note"]);
        assert_eq!(of(Token::String, &lines[0]), ["'it''s'"]);
        let lines = tokens(Lang::Yaml, &["name: zi # the name", "on: true"]);
        assert_eq!(of(Token::Keyword, &lines[0]), ["name"]);
        assert_eq!(of(Token::Keyword, &lines[1]), ["on", "true"]);
        let lines = tokens(Lang::Toml, &["edition = \"2024\""]);
        assert_eq!(of(Token::Keyword, &lines[0]), ["edition"]);
        assert_eq!(of(Token::String, &lines[0]), ["\"2024\""]);
    }
}
