//! A policy group's `expression`: member calls (`labels()`), `&&`, `||`, `!`, parentheses,
//! `true` and `false`, as Kubewarden's groups write them.

use std::collections::BTreeSet;

/// A parsed group expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `name()`: the member's verdict (true when it admits).
    Call(String),
    /// A literal.
    Const(bool),
    /// `!e`.
    Not(Box<Expr>),
    /// `a && b`.
    And(Box<Expr>, Box<Expr>),
    /// `a || b`.
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Parses `text`; errors say where.
    pub fn parse(text: &str) -> Result<Self, String> {
        let tokens = tokenize(text)?;
        let mut parser = Parser { tokens, at: 0 };
        let expr = parser.or()?;
        match parser.tokens.get(parser.at) {
            None => Ok(expr),
            Some(t) => Err(format!("unexpected {t:?} after a complete expression")),
        }
    }

    /// The members it calls.
    pub fn calls(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut BTreeSet<String>) {
        match self {
            Self::Call(name) => {
                out.insert(name.clone());
            }
            Self::Const(_) => {}
            Self::Not(e) => e.collect(out),
            Self::And(a, b) | Self::Or(a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }

    /// The value, with `member(name)` giving each call's verdict.
    pub fn eval(&self, member: &dyn Fn(&str) -> bool) -> bool {
        match self {
            Self::Call(name) => member(name),
            Self::Const(b) => *b,
            Self::Not(e) => !e.eval(member),
            Self::And(a, b) => a.eval(member) && b.eval(member),
            Self::Or(a, b) => a.eval(member) || b.eval(member),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Open,
    Close,
    And,
    Or,
    Not,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            '!' => {
                out.push(Token::Not);
                i += 1;
            }
            '&' | '|' if chars.get(i + 1) == Some(&c) => {
                out.push(if c == '&' { Token::And } else { Token::Or });
                i += 2;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(format!("unexpected character {other:?} at {}", i + 1)),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.chain(&Token::Or, Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.chain(&Token::And, Self::unary, Expr::And)
    }

    /// `operand (op operand)*`, joined from the left.
    fn chain(
        &mut self,
        op: &Token,
        operand: fn(&mut Self) -> Result<Expr, String>,
        join: fn(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Expr, String> {
        let mut left = operand(self)?;
        while self.peek() == Some(op) {
            self.at += 1;
            left = join(Box::new(left), Box::new(operand(self)?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Not) => Ok(Expr::Not(Box::new(self.unary()?))),
            Some(Token::Open) => {
                let inner = self.or()?;
                match self.next() {
                    Some(Token::Close) => Ok(inner),
                    _ => Err("a '(' is not closed".into()),
                }
            }
            Some(Token::Ident(name)) if name == "true" || name == "false" => {
                Ok(Expr::Const(name == "true"))
            }
            Some(Token::Ident(name)) => match (self.next(), self.next()) {
                (Some(Token::Open), Some(Token::Close)) => Ok(Expr::Call(name)),
                _ => Err(format!("{name} must be called as {name}()")),
            },
            Some(t) => Err(format!("unexpected {t:?}")),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_evaluates() {
        let e = Expr::parse("labels() && (vram_fit() || !capacity())").unwrap();
        assert_eq!(
            e.calls(),
            BTreeSet::from(["labels".into(), "vram_fit".into(), "capacity".into()])
        );
        assert!(e.eval(&|n| n != "vram_fit" && n != "capacity"));
        assert!(!e.eval(&|n| n != "capacity" && n != "vram_fit" && n != "labels"));
        assert!(!e.eval(&|n| n != "vram_fit"));
        assert!(Expr::parse("true").unwrap().eval(&|_| false));
    }

    #[test]
    fn errors_say_what() {
        assert_eq!(
            Expr::parse("labels").unwrap_err(),
            "labels must be called as labels()"
        );
        assert_eq!(Expr::parse("(a()").unwrap_err(), "a '(' is not closed");
        assert!(Expr::parse("a() & b()").is_err());
        assert!(Expr::parse("a() b()").is_err());
        assert!(Expr::parse("").is_err());
    }
}
