// Builds the compact copy of a tree-sitter tree that `src/syntax/mod.rs` describes: every node
// `ts_node_child` can reach (named or anonymous, hidden rules walked in place), in pre-order,
// each with its kind, byte range, parent, the index after its subtree and the field its parent
// gives it, as tree-sitter's node API reports them.
//
// Built against the private headers of the tree-sitter release the crate links (build.rs
// finds them beside its public include folder), so a layout change in a new release is a
// compile error here, not a wrong answer. Iterative: a deeply nested file (hostile input) must
// not overflow the stack.

#include <stdlib.h>

#include "tree_sitter/api.h"

#include "language.h"
#include "length.h"
#include "subtree.h"
#include "tree.h"

typedef struct {
  uint32_t start;
  uint32_t end;
  uint32_t parent;
  uint32_t next;
  uint16_t kind;
  uint16_t field;
  uint8_t flags;
} TorchlintEntry;

enum {
  FLAG_NAMED = 1,
  FLAG_EXTRA = 2,
  FLAG_MISSING = 4,
  FLAG_HAS_ERROR = 8,
  // The parent's fields include this (visible, aliased) node's own: `match_statement`'s
  // `alternative` is a `case_clause` of its `block`.
  FLAG_INHERITED = 16,
};

// One node whose children are being walked: a visible node, or a hidden one walked in place.
typedef struct {
  Subtree subtree;
  Length position;          // where the next child starts, before its padding
  uint32_t child_index;
  uint32_t structural_index;
  const TSSymbol *aliases;
  const TSFieldMapEntry *fields;
  const TSFieldMapEntry *fields_end;
  uint32_t entry;           // the visible node the children belong to
  uint32_t first_entry;     // the first node this frame wrote (for a hidden child's field)
  uint16_t pending_field;   // a field the hidden node itself has: its first visible child takes it
  bool visible;
} Frame;

// How many siblings ahead the walk asks for a child's data.
#define PREFETCH_AHEAD 16

static inline TSSymbol public_symbol(const TSLanguage *language, TSSymbol symbol) {
  return symbol == ts_builtin_sym_error ? symbol : language->public_symbol_map[symbol];
}

// The first field the production gives the child at `structural_index` (0: none), and whether
// it is inherited (the child is hidden and the field is one of its own children's).
static uint16_t field_of(const Frame *frame, uint32_t structural_index, bool *inherited) {
  *inherited = false;
  uint16_t found = 0;
  for (const TSFieldMapEntry *entry = frame->fields; entry < frame->fields_end; entry++) {
    if (entry->child_index != structural_index) continue;
    if (entry->inherited) {
      *inherited = true;
    } else if (!found) {
      found = entry->field_id;
    }
  }
  return found;
}

static void open(Frame *frame, const TSLanguage *language, Subtree subtree, Length position,
                 uint32_t entry, uint16_t pending_field, bool visible, uint32_t first_entry) {
  frame->subtree = subtree;
  frame->position = position;
  frame->child_index = 0;
  frame->structural_index = 0;
  frame->aliases = ts_language_alias_sequence(language, subtree.ptr->production_id);
  ts_language_field_map(language, subtree.ptr->production_id, &frame->fields, &frame->fields_end);
  frame->entry = entry;
  frame->first_entry = first_entry;
  frame->pending_field = pending_field;
  frame->visible = visible;
}

// Room for one more frame on `*stack`; false when memory ran out (the stack is freed then).
static bool reserve_frame(Frame **stack, uint32_t depth, uint32_t *capacity) {
  if (depth < *capacity) return true;
  Frame *grown = realloc(*stack, sizeof(Frame) * *capacity * 2);
  if (!grown) {
    free(*stack);
    return false;
  }
  *stack = grown;
  *capacity *= 2;
  return true;
}

// Writes the tree's nodes to `out` (room for `capacity`); returns how many, or `capacity + 1`
// when they do not fit (the caller sized it from the root's visible descendant count).
uint32_t torchlint_build_syntax(TSNode root_node, TorchlintEntry *out, uint32_t capacity) {
  const TSTree *tree = root_node.tree;
  const TSLanguage *language = tree->language;
  Subtree root = tree->root;
  uint32_t count = 0;
  if (capacity == 0) return 1;
  // The root is always visible.
  Length root_position = ts_subtree_padding(root);
  out[0] = (TorchlintEntry){
      .start = root_position.bytes,
      .end = root_position.bytes + ts_subtree_size(root).bytes,
      .parent = UINT32_MAX,
      .next = 0,
      .kind = public_symbol(language, ts_subtree_symbol(root)),
      .field = 0,
      .flags = (ts_subtree_named(root) ? FLAG_NAMED : 0) |
               (ts_subtree_error_cost(root) > 0 ? FLAG_HAS_ERROR : 0),
  };
  count = 1;
  if (ts_subtree_child_count(root) == 0) {
    out[0].next = 1;
    return 1;
  }
  uint32_t depth_capacity = 64;
  Frame *stack = malloc(sizeof(Frame) * depth_capacity);
  if (!stack) return capacity + 1;
  uint32_t depth = 0;
  open(&stack[depth++], language, root, root_position, 0, 0, true, 1);
  while (depth > 0) {
    Frame *frame = &stack[depth - 1];
    if (frame->child_index == ts_subtree_child_count(frame->subtree)) {
      // Done with this node: a visible one's subtree ends here.
      if (frame->visible) out[frame->entry].next = count;
      Length end = frame->position;
      depth--;
      if (depth > 0) stack[depth - 1].position = end;
      continue;
    }
    const Subtree *children = ts_subtree_children(frame->subtree);
    // A child's data is cold by now (a tree larger than the caches): ask for the siblings'
    // ahead of the walk (at the first child, the first PREFETCH_AHEAD; then the one that far
    // ahead), so that their misses overlap instead of following one another. On an 18 MB
    // generated module the build took 12-18 % fewer samples.
    uint32_t ahead = frame->child_index == 0 ? 0 : frame->child_index + PREFETCH_AHEAD - 1;
    uint32_t until = frame->child_index + PREFETCH_AHEAD;
    if (until > ts_subtree_child_count(frame->subtree)) {
      until = ts_subtree_child_count(frame->subtree);
    }
    for (; ahead < until; ahead++) {
      if (!children[ahead].data.is_inline) __builtin_prefetch(children[ahead].ptr);
    }
    Subtree child = children[frame->child_index];
    TSSymbol alias = 0;
    uint16_t field = 0;
    bool inherited = false;
    if (!ts_subtree_extra(child)) {
      if (frame->aliases) alias = frame->aliases[frame->structural_index];
      field = field_of(frame, frame->structural_index, &inherited);
      frame->structural_index++;
    }
    if (frame->child_index > 0) {
      frame->position = length_add(frame->position, ts_subtree_padding(child));
    }
    frame->child_index++;
    Length position = frame->position;
    Length after = length_add(position, ts_subtree_size(child));
    bool visible = ts_subtree_visible(child) || alias;
    if (visible) {
      if (count >= capacity) {
        free(stack);
        return capacity + 1;
      }
      bool named = alias ? ts_language_symbol_metadata(language, alias).named
                         : ts_subtree_named(child);
      uint8_t flags = (named ? FLAG_NAMED : 0) | (ts_subtree_extra(child) ? FLAG_EXTRA : 0) |
                      (ts_subtree_missing(child) ? FLAG_MISSING : 0) |
                      (ts_subtree_error_cost(child) > 0 ? FLAG_HAS_ERROR : 0) |
                      (inherited ? FLAG_INHERITED : 0);
      uint32_t index = count++;
      // A hidden node's own field goes to its first visible descendant
      // (`ts_node_child_by_field_id` answers `ts_node_child(hidden, 0)`): the field of the
      // outermost hidden node this one opens.
      if (!field) {
        for (uint32_t f = depth; f > 0 && !stack[f - 1].visible; f--) {
          if (stack[f - 1].first_entry != index) break;
          if (stack[f - 1].pending_field) field = stack[f - 1].pending_field;
        }
      }
      out[index] = (TorchlintEntry){
          .start = position.bytes,
          .end = after.bytes,
          .parent = frame->entry,
          .next = index + 1,
          .kind = public_symbol(language, alias ? alias : ts_subtree_symbol(child)),
          .field = field,
          .flags = flags,
      };
      if (ts_subtree_child_count(child) > 0) {
        if (!reserve_frame(&stack, depth, &depth_capacity)) return capacity + 1;
        open(&stack[depth++], language, child, position, index, 0, true, count);
        continue;
      }
    } else if (ts_subtree_child_count(child) > 0) {
      // Hidden: its children are the parent's, in place.
      if (!reserve_frame(&stack, depth, &depth_capacity)) return capacity + 1;
      frame = &stack[depth - 1];  // the stack may have moved
      open(&stack[depth++], language, child, position, frame->entry,
           inherited ? 0 : field, false, count);
      continue;
    }
    frame->position = after;
  }
  free(stack);
  return count;
}
