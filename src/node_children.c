// All named children of a node in one pass (src/node_children.rs says why): exactly the nodes
// `ts_node_named_child` gives for each index, with the same ids and positions, and their kinds
// as `ts_node_symbol` gives them.
//
// Built against the private headers of the tree-sitter release the crate links (build.rs
// finds them beside its public include folder), so a layout change in a new release is a
// compile error here, not a wrong answer.

#include "tree_sitter/api.h"

#include "language.h"
#include "length.h"
#include "subtree.h"
#include "tree.h"

// `ts_language_public_symbol`, inlined: the id `kind_id` reports for a grammar symbol.
static inline TSSymbol public_symbol(const TSLanguage *language, TSSymbol symbol) {
  return symbol == ts_builtin_sym_error ? symbol : language->public_symbol_map[symbol];
}

// Appends to `out[count..capacity]` the named children of `parent`, which starts at
// `position`, and their kinds to `kinds`; returns the new count. A hidden child (a rule the
// grammar inlines, like `_simple_statements`) is not a child itself but stands for its own
// named children, so it is walked in place, as `ts_node_named_child` counts them.
static uint32_t push_named_children(
    const TSTree *tree,
    Subtree parent,
    Length position,
    TSNode *out,
    TSSymbol *kinds,
    uint32_t count,
    uint32_t capacity
) {
  uint32_t child_count = ts_subtree_child_count(parent);
  if (child_count == 0) return count;
  const Subtree *children = ts_subtree_children(parent);
  const TSSymbol *aliases = ts_language_alias_sequence(tree->language, parent.ptr->production_id);
  // Aliases are indexed by structural position: extras (comments) take no slot.
  uint32_t structural_index = 0;
  for (uint32_t i = 0; i < child_count && count < capacity; i++) {
    const Subtree *child = &children[i];
    TSSymbol alias = 0;
    if (!ts_subtree_extra(*child)) {
      if (aliases) alias = aliases[structural_index];
      structural_index++;
    }
    // A node's position excludes its padding, and the first child's padding is the parent's.
    if (i > 0) position = length_add(position, ts_subtree_padding(*child));
    bool named = alias ? ts_language_symbol_metadata(tree->language, alias).named
                       : ts_subtree_visible(*child) && ts_subtree_named(*child);
    if (named) {
      // The kind is read here, where the child's subtree is in cache anyway.
      kinds[count] = public_symbol(tree->language, alias ? alias : ts_subtree_symbol(*child));
      // What `ts_node_new` builds, without a call per child.
      out[count++] = (TSNode){
          {position.bytes, position.extent.row, position.extent.column, alias}, child, tree};
    } else if (ts_subtree_child_count(*child) > 0 && child->ptr->named_child_count > 0) {
      count = push_named_children(tree, *child, position, out, kinds, count, capacity);
    }
    position = length_add(position, ts_subtree_size(*child));
  }
  return count;
}

uint32_t torchlint_named_children(TSNode node, TSNode *out, TSSymbol *kinds, uint32_t capacity) {
  Length start = {node.context[0], {node.context[1], node.context[2]}};
  return push_named_children(node.tree, *(const Subtree *)node.id, start, out, kinds, 0, capacity);
}

// Asks the memory system for a node the walk will reach soon: its own data, and the line before
// it, where the array of its children ends (all of it, for a node of up to eight children). A
// walk of a tree larger than the caches otherwise waits on memory at every node; a small
// tree's nodes are in cache already, and the hint costs nothing then.
void torchlint_prefetch(TSNode node) {
  Subtree subtree = *(const Subtree *)node.id;
  if (subtree.data.is_inline) return;
  const char *data = (const char *)subtree.ptr;
  __builtin_prefetch(data);
  __builtin_prefetch(data - 64);
}
