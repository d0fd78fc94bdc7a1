//! The exceptions sharemap raises in Python. Each is a `sharemap.Error` and also the built-in
//! exception Python code expects for its case (a bad value is a `ValueError`, a wrong type a
//! `TypeError`, a missing file a `FileNotFoundError`), so `except sharemap.Error` and the
//! usual idioms both catch it. The classes are made with `type()` at import, as
//! `class SettingError(Error, ValueError)` would be: PyO3's exceptions have one base.

use pyo3::exceptions::{PyException, PyFileNotFoundError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use sharemap::ErrorKind;

/// Every exception class, made once per interpreter.
pub struct Classes {
    pub error: Py<PyType>,
    pub trace: Py<PyType>,
    pub missing_file: Py<PyType>,
    pub machine: Py<PyType>,
    pub spec: Py<PyType>,
    pub setting: Py<PyType>,
    pub argument_type: Py<PyType>,
    pub run: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// `class NAME(*bases)` with a docstring, in the `sharemap` module (where pickling finds it).
/// Its `kind` is its name without "Error" until an instance says more (the facade's kind).
fn class(py: Python<'_>, name: &str, doc: &str, bases: &[&Bound<'_, PyType>]) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__doc__", doc)?;
    namespace.set_item("__module__", "sharemap")?;
    namespace.set_item("kind", name.strip_suffix("Error").filter(|k| !k.is_empty()).unwrap_or(name))?;
    let made = py.get_type::<PyType>().call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(made.cast_into::<PyType>()?.unbind())
}

fn make(py: Python<'_>) -> PyResult<Classes> {
    let value = py.get_type::<PyValueError>();
    let error =
        class(py, "Error", "A sharemap error; `kind` names what it is about.", &[&py.get_type::<PyException>()])?;
    let e = error.bind(py);
    let trace = class(py, "TraceError", "A trace that cannot be read or written (a ValueError).", &[e, &value])?;
    let missing_file = class(
        py,
        "MissingFileError",
        "A trace, dataset or other input file that does not exist (a TraceError and a FileNotFoundError).",
        &[trace.bind(py), &py.get_type::<PyFileNotFoundError>()],
    )?;
    Ok(Classes {
        machine: class(py, "MachineError", "A machine that cannot be read or modelled (a ValueError).", &[e, &value])?,
        spec: class(
            py,
            "SpecError",
            "A mechanism spec (policy, detector, algorithm, mechanism) that is wrong (a ValueError).",
            &[e, &value],
        )?,
        setting: class(
            py,
            "SettingError",
            "A setting or argument value that is wrong or out of range: costs, thread map, page size, a negative seed (a ValueError).",
            &[e, &value],
        )?,
        argument_type: class(
            py,
            "ArgumentTypeError",
            "An argument of the wrong type (a TypeError).",
            &[e, &py.get_type::<PyTypeError>()],
        )?,
        run: class(
            py,
            "RunError",
            "A program that could not be built, started or run to its end (a RuntimeError).",
            &[e, &py.get_type::<PyRuntimeError>()],
        )?,
        trace,
        missing_file,
        error,
    })
}

/// The classes (made at the first call: the module's import).
pub fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || make(py))
}

/// An exception of the class `which` picks, with `message` and, when given, the facade's `kind`.
pub fn raise(which: fn(&Classes) -> &Py<PyType>, message: impl Into<String>, kind: Option<ErrorKind>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let classes = match classes(py) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let err = PyErr::from_type(which(classes).bind(py).clone(), message);
        if let Some(kind) = kind {
            let _ = err.value(py).setattr("kind", format!("{kind:?}"));
        }
        err
    })
}

pub fn setting(message: impl Into<String>) -> PyErr {
    raise(|c| &c.setting, message, None)
}

pub fn spec(message: impl Into<String>) -> PyErr {
    raise(|c| &c.spec, message, None)
}

pub fn run(message: impl Into<String>) -> PyErr {
    raise(|c| &c.run, message, Some(ErrorKind::Program))
}

pub fn error(message: impl Into<String>) -> PyErr {
    raise(|c| &c.error, message, None)
}

/// The Python exception for a facade error, its kind in `kind`.
pub fn of(e: sharemap::Error) -> PyErr {
    let message = e.to_string();
    let kind = e.kind();
    let is_setting = e.setting().is_some();
    let missing = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
    let which: fn(&Classes) -> &Py<PyType> = match kind {
        ErrorKind::Interrupted => return pyo3::exceptions::PyKeyboardInterrupt::new_err(message),
        ErrorKind::Trace | ErrorKind::Io if missing => |c| &c.missing_file,
        ErrorKind::Trace | ErrorKind::Io => |c| &c.trace,
        ErrorKind::Machine | ErrorKind::MachineModel => |c| &c.machine,
        ErrorKind::Program | ErrorKind::Build => |c| &c.run,
        // A `policy.key=value` setting, not the policy's spec.
        ErrorKind::Policy if is_setting => |c| &c.setting,
        ErrorKind::Spec
        | ErrorKind::Policy
        | ErrorKind::Mechanism
        | ErrorKind::NeedsRecording
        | ErrorKind::Mapping
        | ErrorKind::Pattern
        | ErrorKind::Claim => |c| &c.spec,
        _ => |c| &c.setting,
    };
    raise(which, message, Some(kind))
}
