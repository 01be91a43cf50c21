//! The generator of `tools_interposers.rs`, the tools library's communication interposers, from the
//! rows of `wrappers/mpi.prototypes` with a `tools:` role.
use super::*;

/// `tools_interposers.rs`: the `comm_call_interposers!($counting)` macro of the tools library.
pub fn generate_tools(rows: &[Row]) -> Result<String, String> {
    let mut s = String::from(GENERATED);
    s.push_str(
        "/// Defines the communication interposers of the tools library (the rows of wrappers/mpi.prototypes\n\
         /// with a `tools:` role) over the module `$counting`: each calls `$counting::HOOK(\"MPI_name\", the\n\
         /// row's parameters, call)`, `call` making the call through the next definition in the chain.\n\
         #[macro_export]\nmacro_rules! comm_call_interposers {\n    ($counting:path) => {\n",
    );
    for r in rows {
        let Some((hook, args)) = &r.tools else { continue };
        // The statuses the hook passes `call`: the application's, or its own (a status argument, as the
        // hook received it: `app`).
        let (mut closure_params, mut closure_params_wide) = (Vec::new(), Vec::new());
        let (mut passed, mut passed_wide) = (Vec::new(), Vec::new());
        let (mut call_args, mut call_args_wide): (Vec<String>, Vec<String>) =
            r.params.iter().map(|p| (p.name.clone(), p.name.clone())).unzip();
        for a in args {
            passed.push(format!("::core::convert::Into::into({})", app_arg(r, a, false)?));
            passed_wide.push(format!("::core::convert::Into::into({})", app_arg(r, a, true)?));
            if r.param(a)?.c_type == "MPI_Status *" {
                let wrapper = if a.starts_with("array_of_") { "AppArray" } else { "AppArg" };
                closure_params.push(format!("{a}: $crate::app::{wrapper}<'_, $crate::ffi::MPI_Status>"));
                closure_params_wide.push(format!("{a}: $crate::app::{wrapper}<'_, $crate::abi::Status>"));
                let i = r.params.iter().position(|p| &p.name == a).expect("a parameter of the row");
                call_args[i] = format!("{a}.ptr()");
                call_args_wide[i] = format!("{a}.ptr().cast()");
            }
        }
        // On the standard ABI: the hooks the standard ABI's counting serves (`counting::std_abi`, keyed by
        // the pointer handles), else the call forwarded unchanged.
        let prologue = if STD_TOOLS_HOOKS.contains(&hook.as_str()) {
            let mut p = format!(
                "if $crate::abi::standard() {{\n\
                 use $counting as counting;\n\
                 let next = $crate::next_wide!({name});\n\
                 return $crate::guard::ffi_guard(\"{name}\", move || unsafe {{\n\
                 let scope = $crate::app::CallScope::new();\n\
                 counting::std_abi::{hook}(\"{name}\", {passed}move |{cp}| next({all}))\n}});\n}}\n",
                name = r.name,
                passed = passed_wide.iter().map(|p| format!("{p}, ")).collect::<String>(),
                cp = closure_params_wide.join(", "),
                all = call_args_wide.join(", "),
            );
            p.push_str(&abi_prologue(r, false));
            p
        } else {
            abi_prologue(r, true)
        };
        writeln!(
            s,
            "{attrs}{} {{\n\
             {prologue}\
             use $counting as counting;\n\
             let next = $crate::next!({name});\n\
             $crate::guard::ffi_guard(\"{name}\", move || unsafe {{\n\
             let scope = $crate::app::CallScope::new();\n\
             counting::{hook}(\"{name}\", {passed}move |{cp}| next({all}))\n}})\n}}\n",
            signature(r, "$crate::ffi::")?,
            attrs = fn_attrs(),
            name = r.name,
            passed = passed.iter().map(|p| format!("{p}, ")).collect::<String>(),
            cp = closure_params.join(", "),
            all = call_args.join(", "),
        )
        .unwrap();
    }
    s.push_str("    };\n}\n");
    Ok(s)
}
