//! Where a function's tensors live when nothing in it says: library code that takes or keeps a
//! device (`self.device`, a `device` parameter) runs its model there, so a value of unknown
//! placement it computes from each batch counts as the accelerator's for TL104 — unless the
//! code shows the host.

use crate::syntax::Node;

use super::analysis::Analysis;

impl<'a> Analysis<'a> {
    /// Whether `function`, or the class it is a method of, takes or keeps a device: a
    /// parameter that names one (`device`, `output_device`, `device_type`), or `self.device =
    /// ...` (any attribute naming one) in one of the class's methods.
    pub fn keeps_a_device(&self, function: Node<'a>) -> bool {
        let names_a_device = |name: &str| name.contains("device");
        if self
            .parameter_names(function)
            .iter()
            .any(|(_, name)| names_a_device(name))
        {
            return true;
        }
        let Some(class) = self.model.method_class(function) else {
            return false;
        };
        self.model
            .attribute_assignments_in(class.node.byte_range())
            .iter()
            .any(|a| a.object == "self" && names_a_device(a.attribute.trim_start_matches('_')))
    }
}
