//! The report as SARIF (placeholder: being written this session).

use crate::Context;

pub fn render(_ctx: &Context) -> Result<String, String> {
    Err("sarif output is not implemented yet".into())
}
