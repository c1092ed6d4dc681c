//! `DataLoader` calls: whether a callee makes a `torch.utils.data.DataLoader` (under an alias,
//! a subclass of the file, or a choice between such classes), and the arguments a call gives
//! it, `**kwargs` dictionaries bound in the file included. TL106 and TL112 ask.

use crate::syntax::Node;

use super::analysis::Analysis;
use crate::parse::{FIELDS, KINDS, find_argument};

const DATA_LOADERS: &[&str] = &[
    "torch.utils.data.DataLoader",
    "torch.utils.data.dataloader.DataLoader",
];

/// How deep a callee is followed (a name bound to a class chosen by a conditional...).
const MAX_DEPTH: usize = 4;

impl<'a> Analysis<'a> {
    /// Whether an expression names `torch.utils.data.DataLoader`: under an alias, a class of
    /// the file derived from it (`class InfiniteDataLoader(DataLoader)`), or a name bound to a
    /// choice of such classes (`loader = InfiniteDataLoader if infinite else DataLoader`).
    pub fn is_data_loader(&self, node: Node<'a>) -> bool {
        self.is_data_loader_at_depth(node, 0)
    }

    fn is_data_loader_at_depth(&self, node: Node<'a>, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let kind = node.kind_id();
        if kind == KINDS.conditional_expression {
            return [0, 2].into_iter().any(|index| {
                node.named_child(index)
                    .is_some_and(|branch| self.is_data_loader_at_depth(branch, depth + 1))
            });
        }
        if kind != KINDS.identifier && kind != KINDS.attribute {
            return false;
        }
        let text = self.text(node);
        if kind == KINDS.identifier
            && let Some(class) = self.model.class_named(text)
        {
            return class
                .bases
                .iter()
                .any(|base| self.is_data_loader_at_depth(*base, depth + 1));
        }
        if self
            .qualified_name(node)
            .is_some_and(|name| DATA_LOADERS.contains(&name.as_str()))
        {
            return true;
        }
        kind == KINDS.identifier
            && self.reaching_value(node).is_some_and(|value| {
                value.id() != node.id() && self.is_data_loader_at_depth(value, depth + 1)
            })
    }

    /// An argument of a loader call by keyword or position, or from a `**kwargs` dictionary
    /// the file binds (`DataLoader(ds, **loader_kwargs)` with `loader_kwargs = {"num_workers":
    /// 4}` or `dict(num_workers=4)`).
    pub fn loader_argument(
        &self,
        call: Node<'a>,
        keyword: &str,
        position: Option<usize>,
    ) -> Option<Node<'a>> {
        find_argument(call, self.source, Some(keyword), position)
            .found()
            .or_else(|| self.splatted_argument(call, keyword))
    }

    fn splatted_argument(&self, call: Node<'a>, keyword: &str) -> Option<Node<'a>> {
        let arguments = call.child_by_field_id(FIELDS.arguments)?;
        let mut cursor = arguments.walk();
        let splats: Vec<Node<'a>> = arguments
            .named_children(&mut cursor)
            .filter(|a| a.kind_id() == KINDS.dictionary_splat)
            .collect();
        splats.into_iter().find_map(|splat| {
            let mut value = splat.named_child(0)?;
            if let Some(bound) = self.bound_value(value) {
                value = bound;
            }
            self.dictionary_entry(value, keyword)
        })
    }

    fn dictionary_entry(&self, dict: Node<'a>, keyword: &str) -> Option<Node<'a>> {
        if dict.kind_id() == KINDS.dictionary {
            let mut cursor = dict.walk();
            let pairs: Vec<Node<'a>> = dict.named_children(&mut cursor).collect();
            return pairs.into_iter().find_map(|pair| {
                let key = pair.child_by_field_id(FIELDS.key)?;
                let key = self.text(key).trim_matches(['"', '\'']);
                (key == keyword).then(|| pair.child_by_field_id(FIELDS.value))?
            });
        }
        if dict.kind_id() == KINDS.call
            && self
                .model
                .callee(dict)
                .is_some_and(|f| self.text(f) == "dict")
        {
            return find_argument(dict, self.source, Some(keyword), None).found();
        }
        None
    }
}
