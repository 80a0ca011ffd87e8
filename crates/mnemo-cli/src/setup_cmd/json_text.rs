//! Edits of a JSON document's text that leave every byte they do not change where it was: a member
//! added to an object, an element appended to an array, either taken out again. The document is
//! read into a tree of byte spans; an edit is a text insertion or removal at those spans, written
//! with the indentation the document already uses.

use std::ops::Range;

/// A value of the document and where it is.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Object { span: Range<usize>, members: Vec<Member> },
    Array { span: Range<usize>, items: Vec<Node> },
    Scalar { span: Range<usize> },
}

/// An object's member: its decoded key, where its key starts, and its value.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) key: String,
    pub(crate) key_start: usize,
    pub(crate) value: Node,
}

impl Node {
    pub(crate) fn span(&self) -> Range<usize> {
        match self {
            Node::Object { span, .. } | Node::Array { span, .. } | Node::Scalar { span } => span.clone(),
        }
    }

    pub(crate) fn member(&self, key: &str) -> Option<&Member> {
        match self {
            Node::Object { members, .. } => members.iter().find(|m| m.key == key),
            _ => None,
        }
    }
}

/// Reads `text` (which must be valid JSON: check it with `serde_json` first, whose errors name a
/// line and column) into its tree.
pub(crate) fn parse(text: &str) -> Result<Node, String> {
    let mut parser = Parser { bytes: text.as_bytes(), at: 0 };
    parser.space();
    let node = parser.value()?;
    parser.space();
    if parser.at != parser.bytes.len() {
        return Err(format!("unexpected text at byte {}", parser.at));
    }
    Ok(node)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.at < self.bytes.len() && matches!(self.bytes[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Node, String> {
        let start = self.at;
        match self.bytes.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                self.space();
                if self.bytes.get(self.at) != Some(&b'}') {
                    loop {
                        self.space();
                        let key_start = self.at;
                        let key_span = self.string()?;
                        let key: String = serde_json::from_slice(&self.bytes[key_span])
                            .map_err(|e| format!("a key at byte {key_start}: {e}"))?;
                        self.space();
                        self.expect(b':')?;
                        self.space();
                        let value = self.value()?;
                        members.push(Member { key, key_start, value });
                        self.space();
                        if self.bytes.get(self.at) == Some(&b',') {
                            self.at += 1;
                        } else {
                            break;
                        }
                    }
                }
                self.expect(b'}')?;
                Ok(Node::Object { span: start..self.at, members })
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.bytes.get(self.at) != Some(&b']') {
                    loop {
                        self.space();
                        items.push(self.value()?);
                        self.space();
                        if self.bytes.get(self.at) == Some(&b',') {
                            self.at += 1;
                        } else {
                            break;
                        }
                    }
                }
                self.expect(b']')?;
                Ok(Node::Array { span: start..self.at, items })
            }
            Some(b'"') => Ok(Node::Scalar { span: self.string()? }),
            Some(_) => {
                while self.at < self.bytes.len()
                    && !matches!(self.bytes[self.at], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    self.at += 1;
                }
                if self.at == start {
                    return Err(format!("expected a value at byte {start}"));
                }
                Ok(Node::Scalar { span: start..self.at })
            }
            None => Err("unexpected end of the document".to_owned()),
        }
    }

    fn string(&mut self) -> Result<Range<usize>, String> {
        let start = self.at;
        self.expect(b'"')?;
        while let Some(&byte) = self.bytes.get(self.at) {
            self.at += 1;
            match byte {
                b'\\' => self.at += 1,
                b'"' => return Ok(start..self.at),
                _ => {}
            }
        }
        Err(format!("a string at byte {start} does not end"))
    }
}

/// One change to the text: replace `range` with `text`.
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    pub(crate) range: Range<usize>,
    pub(crate) text: String,
}

/// `text` with `edits` applied (they must not overlap).
/// Insertions at one place land in the order given.
pub(crate) fn apply(text: &str, edits: Vec<Edit>) -> String {
    let mut edits: Vec<(usize, Edit)> = edits.into_iter().enumerate().collect();
    edits.sort_by_key(|(i, e)| std::cmp::Reverse((e.range.start, *i)));
    let mut out = text.to_owned();
    for (_, edit) in edits {
        out.replace_range(edit.range, &edit.text);
    }
    out
}

/// The indentation of the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// How the children of the container at `span` whose first child starts at `first` are laid out:
/// `None` when on one line, else the children's indentation.
fn child_layout(text: &str, span: &Range<usize>, first: Option<usize>) -> Option<String> {
    match first {
        Some(first) if text[span.start..first].contains('\n') => Some(line_indent(text, first).to_owned()),
        Some(_) => None,
        // An empty container in a document written on one line stays on one line.
        None if !text.trim_end().contains('\n') => None,
        // An empty container: indent one step (two spaces, or the document's tab) past its line.
        None => {
            let outer = line_indent(text, span.start);
            let step = if outer.contains('\t') { "\t" } else { "  " };
            Some(format!("{outer}{step}"))
        }
    }
}

/// `value` written as JSON whose lines after the first start with `indent` plus its nesting, in
/// steps of `step`.
fn render(value: &serde_json::Value, indent: &str, step: &str) -> String {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    pretty
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let trimmed = line.trim_start_matches(' ');
            let depth = (line.len() - trimmed.len()) / 2;
            if i == 0 { trimmed.to_owned() } else { format!("\n{indent}{}{trimmed}", step.repeat(depth)) }
        })
        .collect()
}

/// The edit that adds `key: value` as the last member of `object`, or `value` as the last element
/// of an array (`key` `None`).
pub(crate) fn add(text: &str, container: &Node, key: Option<&str>, value: &serde_json::Value) -> Edit {
    let span = container.span();
    let (first, last_end) = match container {
        Node::Object { members, .. } => {
            (members.first().map(|m| m.key_start), members.last().map(|m| m.value.span().end))
        }
        Node::Array { items, .. } => {
            (items.first().map(|i| i.span().start), items.last().map(|i| i.span().end))
        }
        Node::Scalar { .. } => (None, None),
    };
    let prefix = key.map_or(String::new(), |key| format!("{}: ", serde_json::Value::from(key)));
    match child_layout(text, &span, first) {
        None => {
            let item = format!("{prefix}{}", value);
            match last_end {
                Some(end) => Edit { range: end..end, text: format!(", {item}") },
                None => Edit { range: span.start + 1..span.start + 1, text: item },
            }
        }
        Some(indent) => {
            let outer = line_indent(text, span.start);
            let step = indent.strip_prefix(outer).filter(|s| !s.is_empty()).unwrap_or("  ").to_owned();
            let item = format!("{prefix}{}", render(value, &indent, &step));
            match last_end {
                Some(end) => Edit { range: end..end, text: format!(",\n{indent}{item}") },
                None => {
                    Edit { range: span.start + 1..span.end - 1, text: format!("\n{indent}{item}\n{outer}") }
                }
            }
        }
    }
}

/// The edit that takes the `index`-th child out of `container` with its separating comma and the
/// space before it, leaving its siblings' text as it was.
pub(crate) fn remove(container: &Node, index: usize) -> Edit {
    let spans: Vec<Range<usize>> = match container {
        Node::Object { members, .. } => members.iter().map(|m| m.key_start..m.value.span().end).collect(),
        Node::Array { items, .. } => items.iter().map(Node::span).collect(),
        Node::Scalar { .. } => Vec::new(),
    };
    let span = container.span();
    let this = spans[index].clone();
    if spans.len() == 1 {
        // The only child: the container is left empty, `{}` or `[]`, as an empty one is written.
        return Edit { range: span.start + 1..span.end - 1, text: String::new() };
    }
    if index > 0 {
        Edit { range: spans[index - 1].end..this.end, text: String::new() }
    } else {
        Edit { range: this.start..spans[1].start, text: String::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array<'a>(root: &'a Node, key: &str) -> &'a Node {
        &root.member(key).unwrap().value
    }

    #[test]
    fn an_added_element_taken_out_again_leaves_the_text_as_it_was_wherever_it_sits() {
        for text in [
            "{\"a\": [1, 2, 3]}\n",
            "{\n    \"a\": [\n        1,\n        2\n    ],\n    \"b\": {}\n}\n",
            "{\n\t\"a\": [\n\t\t{\"x\": 1}\n\t]\n}",
        ] {
            let root = parse(text).unwrap();
            let added = apply(text, vec![add(text, array(&root, "a"), None, &serde_json::json!({"k": [1]}))]);
            let parsed: serde_json::Value = serde_json::from_str(&added).unwrap();
            assert_eq!(parsed["a"].as_array().unwrap().last().unwrap(), &serde_json::json!({"k": [1]}));
            let root = parse(&added).unwrap();
            let Node::Array { items, .. } = array(&root, "a") else { panic!() };
            let back = apply(&added, vec![remove(array(&root, "a"), items.len() - 1)]);
            assert_eq!(back, text);
        }
    }

    #[test]
    fn the_first_or_a_middle_child_is_taken_out_with_its_own_separator() {
        let text = "{\n  \"a\": [\n    1,\n    2,\n    3\n  ]\n}\n";
        let root = parse(text).unwrap();
        assert_eq!(apply(text, vec![remove(array(&root, "a"), 0)]), "{\n  \"a\": [\n    2,\n    3\n  ]\n}\n");
        assert_eq!(apply(text, vec![remove(array(&root, "a"), 1)]), "{\n  \"a\": [\n    1,\n    3\n  ]\n}\n");
        let object = "{\"x\": 1, \"y\": \"a,b}\", \"z\": [\"]\"]}";
        let root = parse(object).unwrap();
        assert_eq!(apply(object, vec![remove(&root, 1)]), "{\"x\": 1, \"z\": [\"]\"]}");
    }
}
