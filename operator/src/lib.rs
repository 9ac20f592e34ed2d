//! Platforms that drive the controller core (`kubernetes`, `local`).
