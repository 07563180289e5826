//! Container images built offline: files, directories and symbolic links
//! plus a config, written as a docker-archive tarball (`docker save`
//! format) with no base image and no registry. Deterministic: the same
//! inputs give the same image id.
//!
//! ```no_run
//! use sluice_image::Image;
//! let mut image = Image::default();
//! image.layer.host_file("/bin/busybox", std::path::Path::new("/bin/busybox"))?;
//! image.layer.symlink("/bin/sh", "busybox")?;
//! image.config.entrypoint = vec!["/bin/sh".into()];
//! image.write_docker_archive_file("busybox.tar".as_ref(), &["busybox:dev".into()])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`sluice::sluice_image`] is the Sluice image built this way, and
//! [`sluice::SLUICE`] its runtime contract, which the `Dockerfile` must keep
//! too.

pub mod archive;
pub mod layer;
pub mod libs;
pub mod sluice;
pub mod tar;

pub use archive::{Config, Image, ImageError, LoadedImage, Written, read_docker_archive};
pub use layer::{Content, Layer, LayerError, Node};
