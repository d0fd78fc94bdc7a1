//! `libsharemap_stm_traced.a`: the STM and the tracer runtime in one library, for programs
//! built with `sharemap cc --stm`. At start it hands the runtime's recording functions to
//! the STM, so each transactional load and store is recorded as an access of its word and
//! each attempt as transaction begin, commit and abort events.

use sharemap_rt::stm as rt;
use sharemap_stm::hooks::{Tracer, set_tracer};

static TRACER: Tracer = Tracer { access: rt::access, event: rt::event, quiet: rt::quiet };

/// Registers the tracer. `sharemap cc --stm` keeps it linked (`--undefined`).
#[unsafe(no_mangle)]
pub extern "C" fn sharemap_stm_traced_register() {
    set_tracer(&TRACER);
}

#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_START: extern "C" fn() = sharemap_stm_traced_register;
