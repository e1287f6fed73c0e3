//! The report as HTML (placeholder: being written this session).

use crate::Context;

pub fn render(_ctx: &Context) -> Result<String, String> {
    Err("html output is not implemented yet".into())
}
