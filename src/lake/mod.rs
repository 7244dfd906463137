//! Reading back what runs wrote to a table folder: the table's shape from its manifests
//! ([`shape`]), and its data files — the current baseline plan's parts and every change
//! part, the parts committed runs list since a point ([`files`]). Read-only: nothing here
//! writes or removes a file.

pub mod files;
pub mod shape;
