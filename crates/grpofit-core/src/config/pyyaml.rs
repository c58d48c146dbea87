//! A YAML recipe read as TRL reads it: PyYAML 6.0's `yaml.safe_load` (trl 1.15.0,
//! `trl/scripts/utils.py`, `TrlParser.parse_args_and_config`).
//!
//! yaml-rust2's parser gives the events; this module composes them as PyYAML's `Composer` does
//! (one document: `get_single_node` raises "expected a single document in the stream" at a
//! second; an anchor defined twice raises "found duplicate anchor"; an alias is the node it
//! names) and builds the values as `SafeConstructor` does (`flatten_mapping`: the maps a `<<`
//! key merges go first, a list's earlier maps over its later ones, the map's own keys over
//! all; scalars resolved by `pyyaml_resolve`). Each node keeps where it starts in the text, for
//! the in-place edit (`yaml_edit`).

use super::pyyaml_resolve::{self as resolve, Implicit, Py};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, Scanner, TScalarStyle, TokenType};

/// Why PyYAML would not read the text (or this reader cannot say what it reads).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    /// 1-based
    pub line: Option<usize>,
    pub message: String,
}

fn error(line: Option<usize>, message: impl Into<String>) -> YamlError {
    YamlError {
        line,
        message: message.into(),
    }
}

/// One node of the document, where it starts (a byte of the whole text) and its anchor.
#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub start: usize,
    pub line: usize,
    /// the parser's anchor id (1, 2, ... in the order written), 0 for none
    pub anchor: usize,
    pub tag: Option<Tag>,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Scalar(String, TScalarStyle),
    Seq(Vec<usize>),
    /// key and value nodes; `flow` for `{...}`
    Map {
        entries: Vec<(usize, usize)>,
        flow: bool,
    },
    /// the node the alias names
    Alias(usize),
}

/// The first (and only) document, composed.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub nodes: Vec<Node>,
    pub root: Option<usize>,
    /// each anchor's name and the byte it is written at, by id - 1
    pub anchors: Vec<(String, usize)>,
    /// where an explicit end marker `...` is written
    pub end_marker: Option<usize>,
    /// the bytes of a leading byte order mark (skipped, as PyYAML's scanner does)
    pub bom: usize,
}

/// Aliases can make a small text a huge value ("billion laughs"): PyYAML would build it; a
/// recipe never needs more values than this.
const MAX_VALUES: usize = 1_000_000;
/// Deeper than any recipe nests; a recursive alias (`a: &a [*a]`) stops here.
const MAX_DEPTH: usize = 200;

struct Events {
    events: Vec<(Event, Marker)>,
}

impl MarkedEventReceiver for Events {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.events.push((ev, mark));
    }
}

/// Byte offsets of the text's characters (yaml-rust2's markers count characters).
struct Offsets {
    bytes: Vec<usize>,
    base: usize,
}

impl Offsets {
    fn new(body: &str, base: usize) -> Offsets {
        let mut bytes: Vec<usize> = body.char_indices().map(|(b, _)| b + base).collect();
        bytes.push(body.len() + base);
        Offsets { bytes, base }
    }

    fn byte(&self, mark: &Marker) -> usize {
        self.bytes
            .get(mark.index())
            .copied()
            .unwrap_or_else(|| self.bytes.last().copied().unwrap_or(self.base))
    }
}

/// Composes `text`'s one document as PyYAML's composer does.
pub fn compose(text: &str) -> Result<Doc, YamlError> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let body = &text[bom..];
    let offsets = Offsets::new(body, bom);
    let mut events = Events { events: Vec::new() };
    Parser::new_from_str(body)
        .load(&mut events, true)
        .map_err(|e| {
            error(
                Some(e.marker().line()),
                format!("not valid YAML: {}", e.info()),
            )
        })?;
    let anchors = anchors(body, &offsets)?;
    let mut doc = Doc {
        anchors,
        bom,
        ..Doc::default()
    };
    let mut composer = Composer {
        text,
        events: &events.events,
        at: 0,
        offsets: &offsets,
        by_anchor: Vec::new(),
        doc: &mut doc,
    };
    composer.stream()?;
    Ok(doc)
}

/// The anchors' names in the order written (the parser numbers them so), refusing a name
/// defined twice as PyYAML's composer does, and a tab where PyYAML's scanner reads none.
fn anchors(body: &str, offsets: &Offsets) -> Result<Vec<(String, usize)>, YamlError> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut lines = Vec::new();
    let mut documents = 0;
    let mut tokens: Vec<(usize, TokenType)> = Vec::new();
    for token in Scanner::new(body.chars()) {
        tokens.push((offsets.byte(&token.0) - offsets.base, token.1.clone()));
        match token.1 {
            TokenType::Anchor(name) => {
                let at = offsets.byte(&token.0);
                if let Some(first) = out.iter().position(|(n, _)| *n == name) {
                    return Err(error(
                        Some(token.0.line()),
                        format!(
                            "the anchor `&{name}` is defined twice (first on line {}): PyYAML refuses a duplicate anchor",
                            lines[first]
                        ),
                    ));
                }
                out.push((name, at));
                lines.push(token.0.line());
            }
            TokenType::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    // a later document may define an anchor again; it is refused on its own
                    break;
                }
            }
            _ => {}
        }
    }
    tabs(body, &tokens)?;
    Ok(out)
}

/// PyYAML's scanner skips only spaces between tokens (`Scanner.scan_to_next_token`) and ends
/// a plain scalar at a tab (`scan_plain`): a tab is read only inside a comment, a quoted
/// scalar or a block scalar's lines; anywhere else it raises "found character '\t' that
/// cannot start any token".
fn tabs(body: &str, tokens: &[(usize, TokenType)]) -> Result<(), YamlError> {
    if !body.contains('\t') {
        return Ok(());
    }
    let mut safe: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, (at, token)) in tokens.iter().enumerate() {
        let TokenType::Scalar(style, _) = token else {
            continue;
        };
        let end = match style {
            TScalarStyle::Literal | TScalarStyle::Folded => {
                tokens.get(i + 1).map_or(body.len(), |(next, _)| *next)
            }
            TScalarStyle::SingleQuoted => quoted_end(body, *at, '\''),
            TScalarStyle::DoubleQuoted => quoted_end(body, *at, '"'),
            TScalarStyle::Plain => continue,
        };
        safe.push(*at..end.max(*at));
    }
    safe.sort_by_key(|r| r.start);
    let mut next_safe = 0;
    let mut comment = false;
    let mut previous = '\n';
    for (i, c) in body.char_indices() {
        while safe.get(next_safe).is_some_and(|r| r.end <= i) {
            next_safe += 1;
        }
        if safe.get(next_safe).is_some_and(|r| r.contains(&i)) {
            previous = 'x';
            continue;
        }
        match c {
            '\n' | '\r' => comment = false,
            '#' if matches!(previous, ' ' | '\n' | '\r' | '\u{feff}') => comment = true,
            '\t' if !comment => {
                let line = body[..i].matches('\n').count() + 1;
                return Err(error(
                    Some(line),
                    "a tab where PyYAML reads none (\"found character '\\t' that cannot start any token\"): use spaces",
                ));
            }
            _ => {}
        }
        previous = c;
    }
    Ok(())
}

/// The byte after the quote closing the quoted scalar that starts at `at` (`''` and `\"`
/// escaped), over lines.
fn quoted_end(body: &str, at: usize, q: char) -> usize {
    let bytes = body.as_bytes();
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if q == '"' => i += 2,
            b'\'' if q == '\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            b if b == q as u8 => return i + 1,
            _ => i += 1,
        }
    }
    body.len()
}

struct Composer<'a> {
    text: &'a str,
    events: &'a [(Event, Marker)],
    at: usize,
    offsets: &'a Offsets,
    /// anchor id to node
    by_anchor: Vec<(usize, usize)>,
    doc: &'a mut Doc,
}

impl Composer<'_> {
    fn next(&mut self) -> Option<(&Event, Marker)> {
        let (ev, mark) = self.events.get(self.at)?;
        self.at += 1;
        Some((ev, *mark))
    }

    fn stream(&mut self) -> Result<(), YamlError> {
        let mut documents = 0;
        while let Some((ev, mark)) = self.next() {
            match ev {
                Event::DocumentStart => {
                    documents += 1;
                    if documents > 1 {
                        return Err(error(
                            Some(mark.line()),
                            "a second document starts here: TRL reads a recipe with yaml.safe_load, which takes one document only (\"expected a single document in the stream\"); keep one",
                        ));
                    }
                    self.doc.root = Some(self.node(0)?);
                }
                Event::DocumentEnd => {
                    let at = self.offsets.byte(&mark);
                    if self.text.get(at..).is_some_and(|t| t.starts_with("...")) {
                        self.doc.end_marker = Some(at);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn push(&mut self, kind: Kind, mark: Marker, anchor: usize, tag: Option<Tag>) -> usize {
        self.doc.nodes.push(Node {
            kind,
            start: self.offsets.byte(&mark),
            line: mark.line(),
            anchor,
            tag,
        });
        let id = self.doc.nodes.len() - 1;
        if anchor > 0 {
            self.by_anchor.push((anchor, id));
        }
        id
    }

    fn node(&mut self, depth: usize) -> Result<usize, YamlError> {
        let Some((ev, mark)) = self.next() else {
            return Err(error(None, "the document ends inside a value"));
        };
        if depth > MAX_DEPTH {
            return Err(error(Some(mark.line()), "nested deeper than any recipe"));
        }
        let ev = ev.clone();
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                Ok(self.push(Kind::Scalar(value, style), mark, anchor, tag))
            }
            Event::Alias(id) => {
                let target = self
                    .by_anchor
                    .iter()
                    .rev()
                    .find(|(a, _)| *a == id)
                    .map(|(_, n)| *n)
                    .ok_or_else(|| error(Some(mark.line()), "an alias to no anchor"))?;
                Ok(self.push(Kind::Alias(target), mark, 0, None))
            }
            Event::SequenceStart(anchor, tag) => {
                let id = self.push(Kind::Seq(Vec::new()), mark, anchor, tag);
                let mut items = Vec::new();
                while !matches!(self.events.get(self.at), Some((Event::SequenceEnd, _))) {
                    items.push(self.node(depth + 1)?);
                }
                self.at += 1;
                self.doc.nodes[id].kind = Kind::Seq(items);
                Ok(id)
            }
            Event::MappingStart(anchor, tag) => {
                let at = self.offsets.byte(&mark);
                let flow = self.text.get(at..).is_some_and(|t| t.starts_with('{'));
                let id = self.push(
                    Kind::Map {
                        entries: Vec::new(),
                        flow,
                    },
                    mark,
                    anchor,
                    tag,
                );
                let mut entries = Vec::new();
                while !matches!(self.events.get(self.at), Some((Event::MappingEnd, _))) {
                    let key = self.node(depth + 1)?;
                    let value = self.node(depth + 1)?;
                    entries.push((key, value));
                }
                self.at += 1;
                self.doc.nodes[id].kind = Kind::Map { entries, flow };
                Ok(id)
            }
            other => Err(error(Some(mark.line()), format!("unexpected {other:?}"))),
        }
    }
}

impl Doc {
    /// The node an alias names (itself for any other node).
    pub fn target(&self, id: usize) -> usize {
        match self.nodes[id].kind {
            Kind::Alias(t) => t,
            _ => id,
        }
    }

    /// The document's value as `yaml.safe_load` returns it (`None` for an empty document).
    pub fn value(&self) -> Result<Py, YamlError> {
        let mut budget = MAX_VALUES;
        match self.root {
            Some(root) => self.build(root, 0, &mut budget),
            None => Ok(Py::None),
        }
    }

    /// One node's value (`BaseConstructor.construct_object`).
    pub fn build(&self, id: usize, depth: usize, budget: &mut usize) -> Result<Py, YamlError> {
        let id = self.target(id);
        let node = &self.nodes[id];
        *budget = budget.checked_sub(1).ok_or_else(|| {
            error(
                Some(node.line),
                "its aliases expand to more values than any recipe holds",
            )
        })?;
        if depth > MAX_DEPTH {
            return Err(error(
                Some(node.line),
                "an alias inside the value it names (a recursive structure)",
            ));
        }
        let tag = node.tag.as_ref().map(tag_name);
        match &node.kind {
            Kind::Scalar(value, style) => scalar(value, *style, tag.as_deref(), node.line),
            Kind::Seq(items) => {
                check_tag(tag.as_deref(), "seq", node.line)?;
                items
                    .iter()
                    .map(|i| self.build(*i, depth + 1, budget))
                    .collect::<Result<_, _>>()
                    .map(Py::Seq)
            }
            Kind::Map { .. } => {
                check_tag(tag.as_deref(), "map", node.line)?;
                let mut out: Vec<(Py, Py)> = Vec::new();
                let mut index = std::collections::HashMap::new();
                for (k, v) in self.flatten(id, depth, budget)? {
                    let key = self.build(k, depth + 1, budget)?;
                    if matches!(key, Py::Seq(_) | Py::Map(_)) {
                        return Err(error(
                            Some(self.nodes[k].line),
                            "a list or map as a key: PyYAML refuses an unhashable key",
                        ));
                    }
                    let value = self.build(v, depth + 1, budget)?;
                    // a string key found through an index: a file of many keys stays linear
                    match &key {
                        Py::Str(name) => match index.get(name) {
                            Some(&at) => out[at] = (key, value),
                            None => {
                                index.insert(name.clone(), out.len());
                                out.push((key, value));
                            }
                        },
                        _ => Py::insert(&mut out, key, value),
                    }
                }
                Ok(Py::Map(out))
            }
            Kind::Alias(_) => Err(error(Some(node.line), "an alias to an alias")),
        }
    }

    /// Whether the key node is PyYAML's merge key `<<` (plain, untagged).
    pub fn is_merge(&self, key: usize) -> bool {
        let node = &self.nodes[self.target(key)];
        matches!(&node.kind, Kind::Scalar(v, TScalarStyle::Plain) if node.tag.is_none() && resolve::implicit(v) == Implicit::Merge)
    }

    /// `SafeConstructor.flatten_mapping`: a map's entries with its merges resolved.
    pub fn flatten(
        &self,
        id: usize,
        depth: usize,
        budget: &mut usize,
    ) -> Result<Vec<(usize, usize)>, YamlError> {
        let id = self.target(id);
        let Kind::Map { entries, .. } = &self.nodes[id].kind else {
            return Err(error(Some(self.nodes[id].line), "not a map"));
        };
        if depth > MAX_DEPTH {
            return Err(error(Some(self.nodes[id].line), "merges nested too deep"));
        }
        let mut merged = Vec::new();
        let mut own = Vec::new();
        *budget = budget.checked_sub(entries.len()).ok_or_else(|| {
            error(
                Some(self.nodes[id].line),
                "its merges expand to more values than any recipe holds",
            )
        })?;
        for &(k, v) in entries {
            if !self.is_merge(k) {
                own.push((k, v));
                continue;
            }
            let target = self.target(v);
            match &self.nodes[target].kind {
                Kind::Map { .. } => merged.extend(self.flatten(target, depth + 1, budget)?),
                Kind::Seq(items) => {
                    let mut sub = Vec::new();
                    for &item in items {
                        let item = self.target(item);
                        if !matches!(self.nodes[item].kind, Kind::Map { .. }) {
                            return Err(error(
                                Some(self.nodes[item].line),
                                "`<<` merges a list of maps only: PyYAML expects a mapping for merging",
                            ));
                        }
                        sub.push(self.flatten(item, depth + 1, budget)?);
                    }
                    // earlier maps of the list win: they are applied last
                    for entries in sub.into_iter().rev() {
                        merged.extend(entries);
                    }
                }
                _ => {
                    return Err(error(
                        Some(self.nodes[target].line),
                        "`<<` merges a map or a list of maps: PyYAML expects a mapping or list of mappings for merging",
                    ));
                }
            }
        }
        merged.extend(own);
        Ok(merged)
    }
}

/// A tag's full name (`tag:yaml.org,2002:str`, `!foo`).
fn tag_name(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

const CORE: &str = "tag:yaml.org,2002:";

fn check_tag(tag: Option<&str>, kind: &str, line: usize) -> Result<(), YamlError> {
    match tag {
        None => Ok(()),
        Some(t) if t.strip_prefix(CORE) == Some(kind) => Ok(()),
        Some(t) => Err(unknown_tag(t, line)),
    }
}

fn unknown_tag(tag: &str, line: usize) -> YamlError {
    error(
        Some(line),
        format!(
            "the tag `{tag}`: yaml.safe_load has no constructor for it (could not determine a constructor)"
        ),
    )
}

/// A scalar's value: a plain one as the resolvers say, a quoted one a string, a tagged one
/// as its tag's constructor builds it.
fn scalar(
    value: &str,
    style: TScalarStyle,
    tag: Option<&str>,
    line: usize,
) -> Result<Py, YamlError> {
    let kind = match tag {
        Some(t) => match t.strip_prefix(CORE) {
            Some("str") => Implicit::Str,
            Some("int") => Implicit::Int,
            Some("float") => Implicit::Float,
            Some("bool") => Implicit::Bool,
            Some("null") => Implicit::Null,
            Some("timestamp") => Implicit::Timestamp,
            _ => return Err(unknown_tag(t, line)),
        },
        None if style == TScalarStyle::Plain => resolve::implicit(value),
        None => Implicit::Str,
    };
    let bad = |what: &str| error(Some(line), format!("`{value}` is not {what}"));
    Ok(match kind {
        Implicit::Str => Py::Str(value.to_string()),
        Implicit::Null => Py::None,
        Implicit::Bool => Py::Bool(resolve::to_bool(value).ok_or_else(|| bad("a boolean"))?),
        Implicit::Int => Py::Int(
            resolve::to_int(value).ok_or_else(|| bad("an integer grpofit reads (64 bits)"))?,
        ),
        Implicit::Float => Py::Float(resolve::to_float(value).ok_or_else(|| bad("a number"))?),
        Implicit::Timestamp => Py::Timestamp(value.to_string()),
        Implicit::Merge => Py::Str(value.to_string()),
        Implicit::Value => return Err(unknown_tag("tag:yaml.org,2002:value", line)),
    })
}

/// `yaml.safe_load(text)`.
pub fn safe_load(text: &str) -> Result<Py, YamlError> {
    compose(text)?.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Py {
        safe_load(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    #[test]
    fn merge_keys_follow_flatten_mapping() {
        let text = "d: &d {a: 1, b: 2}\ne: &e {a: 3, c: 4}\nf:\n  <<: [*d, *e]\n  b: 9\n";
        let f = load(text).get("f").cloned().unwrap();
        assert_eq!(f.get("a").map(|v| v.same(&Py::Int(1))), Some(true));
        assert_eq!(f.get("b").map(|v| v.same(&Py::Int(9))), Some(true));
        assert_eq!(f.get("c").map(|v| v.same(&Py::Int(4))), Some(true));
        let top = load(
            "defaults: &defaults\n  per_device_train_batch_size: 4\n  gradient_accumulation_steps: 4\n<<: *defaults\nper_device_train_batch_size: 4\n",
        );
        assert!(
            top.get("gradient_accumulation_steps")
                .unwrap()
                .same(&Py::Int(4))
        );
        // a later merge does not beat an explicit key
        let t = load("<<: {a: 1}\na: 2\n<<: {b: 3}\n");
        assert!(t.get("a").unwrap().same(&Py::Int(2)));
        assert!(t.get("b").unwrap().same(&Py::Int(3)));
    }

    #[test]
    fn refuses_what_pyyaml_refuses() {
        for text in [
            "a: 1\n---\nb: 2\n",
            "a: &x 1\nb: &x 2\n",
            "? [a]\n: 1\n",
            "a: !foo 1\n",
            "a: =\n",
            "a: {<<: 1}\n",
        ] {
            assert!(safe_load(text).is_err(), "{text}");
        }
        assert!(safe_load("a: 1\n...\n# end\n").is_ok());
        // PyYAML reads a tab only in a comment, a quoted scalar or a block scalar
        for text in [
            "a: 4\t\n",
            "a:\t4\n",
            "a: x\ty\n",
            "a: \"x\"\t\n",
            "a: 1\n\t\nb: 2\n",
        ] {
            assert!(safe_load(text).is_err(), "{text:?}");
        }
        for text in [
            "a: 4 # c\td\n",
            "a: \"x\ty\"\n",
            "a: |\n  x\ty\n",
            "# \t\na: 1\n",
        ] {
            assert!(safe_load(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn a_bom_and_cr_line_ends_are_read() {
        let v = load("\u{feff}a: 1\rb: yes\r");
        assert!(v.get("a").unwrap().same(&Py::Int(1)));
        assert!(v.get("b").unwrap().same(&Py::Bool(true)));
        let doc = compose("\u{feff}é: 1\n").unwrap();
        let root = doc.root.unwrap();
        let Kind::Map { entries, .. } = &doc.nodes[root].kind else {
            panic!()
        };
        assert_eq!(doc.nodes[entries[0].1].start, "\u{feff}é: ".len());
    }

    #[test]
    fn laughs_are_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(safe_load(&text).is_err());
        // merges of merges, each twice: 2^40 entries unless bounded
        let mut text = String::from("m0: &m0 {a: 1}\n");
        for i in 1..40 {
            let p = i - 1;
            text.push_str(&format!("m{i}: &m{i} {{<<: [*m{p}, *m{p}]}}\n"));
        }
        assert!(safe_load(&text).is_err());
        // a tab check over many quoted scalars stays linear
        let many: String = (0..20_000)
            .map(|i| format!("a{i}: \"x\"\n"))
            .collect::<String>()
            + "b: 1 # \t\n";
        let started = std::time::Instant::now();
        assert!(safe_load(&many).is_ok());
        assert!(started.elapsed().as_secs() < 20);
    }
}
