//! The generator's tests: what the rows of wrappers/mpi.prototypes become.
use super::*;
use crate::prototype_list::parse;

#[test]
fn c_types_map_to_the_rust_abi_types() {
    let t = |c: &str| rust_type(c, false, "ffi::").unwrap();
    assert_eq!(t("int"), "::std::os::raw::c_int");
    assert_eq!(t("int *"), "*mut ::std::os::raw::c_int");
    assert_eq!(t("const int []"), "*const ::std::os::raw::c_int");
    assert_eq!(t("const void *"), "*const ::std::os::raw::c_void");
    assert_eq!(t("char ***"), "*mut *mut *mut ::std::os::raw::c_char");
    assert_eq!(t("MPI_Request []"), "*mut ffi::MPI_Request");
    assert_eq!(t("const MPI_Status *"), "*const ffi::MPI_Status");
    assert_eq!(t("MPI_Count"), "ffi::MPI_Count");
    assert_eq!(t("MPIX_Grequest_poll_function *"), "ffi::MPIX_Grequest_poll_function");
    assert_eq!(
        rust_type("MPIX_Grequest_wait_function *", true, "ffi::").unwrap(),
        "Option<ffi::MPIX_Grequest_wait_function>"
    );
    // A by-value MPI type must be a handle or as wide in both ABIs; pointers to anything MPI are fine.
    assert_eq!(t("MPI_Comm"), "ffi::MPI_Comm");
    assert_eq!(t("MPI_Fint *"), "*mut ffi::MPI_Fint");
    assert!(rust_type("MPI_Fint", false, "ffi::").unwrap_err().contains("neither a handle"));
    for bad in ["void", "unsigned int", "float", "const int", "MPI_Comm_copy_attr_function **"] {
        assert!(rust_type(bad, false, "ffi::").is_err(), "{bad}");
    }
    assert!(rust_type("int *", true, "ffi::").is_err());
}

#[test]
fn the_list_parses_and_generates() {
    let rows = parse(include_str!("../../mpi.prototypes")).unwrap();
    assert!(rows.len() > 100);
    let sendrecv = rows.iter().find(|r| r.name == "MPI_Sendrecv").unwrap();
    assert_eq!(
        fn_type(sendrecv, "").unwrap(),
        "unsafe extern \"C\" fn(*const ::std::os::raw::c_void, ::std::os::raw::c_int, MPI_Datatype, \
         ::std::os::raw::c_int, ::std::os::raw::c_int, *mut ::std::os::raw::c_void, ::std::os::raw::c_int, \
         MPI_Datatype, ::std::os::raw::c_int, ::std::os::raw::c_int, MPI_Comm, *mut MPI_Status) -> \
         ::std::os::raw::c_int"
    );
    generate_fn_types(&rows).unwrap();
    generate_lean(&rows).unwrap();
    generate_tools(&rows).unwrap();
    assert!(
        generate_pmpi_table(&rows).contains("pub PMPIX_Stream_create: Option<crate::fn_types::MPIX_Stream_create>,")
    );
}

/// The standard ABI: every interposer takes its handles passed by value register-wide, forwards them
/// unchanged on that ABI and narrows them otherwise; lean:init leaves it to its hook; a completion
/// row's own pass-through check holds there, and its slow path checks anyway.
#[test]
fn interposers_pass_the_standard_abi_through_with_wide_handles() {
    let rows = parse(include_str!("../../mpi.prototypes")).unwrap();
    let lean = generate_lean(&rows).unwrap();
    let tools = generate_tools(&rows).unwrap();
    let wide = "$crate::ffi::WideHandle";
    assert!(lean.contains(&format!(
        "fn MPI_Comm_set_errhandler(comm: {wide}, errhandler: {wide}) -> ::std::os::raw::c_int {{\n\
         if $crate::abi::standard() {{\n\
         return $crate::next_wide!(MPI_Comm_set_errhandler)(comm, errhandler);\n}}\n\
         let comm = comm as $crate::ffi::MPI_Comm;\n\
         let errhandler = errhandler as $crate::ffi::MPI_Errhandler;\n\
         use $hooks as hooks;\n"
    )));
    // A tools row whose hook the standard ABI's counting serves calls it with the wide handles; another
    // passes through.
    assert!(tools.contains(&format!(
        "datatype: {wide}, dest: ::std::os::raw::c_int, tag: ::std::os::raw::c_int, comm: {wide}) -> \
         ::std::os::raw::c_int {{\n\
         if $crate::abi::standard() {{\n\
         use $counting as counting;\n\
         let next = $crate::next_wide!(MPI_Send);\n\
         return $crate::guard::ffi_guard(\"MPI_Send\", move || unsafe {{\n\
         let scope = $crate::app::CallScope::new();\n\
         counting::std_abi::send(\"MPI_Send\", ::core::convert::Into::into(comm), \
         ::core::convert::Into::into(count), ::core::convert::Into::into(datatype), \
         ::core::convert::Into::into(dest), move || next(buf, count, datatype, dest, tag, comm))\n}});\n}}\n\
         let datatype = datatype as $crate::ffi::MPI_Datatype;\n\
         let comm = comm as $crate::ffi::MPI_Comm;\n"
    )));
    // Pointers reach the hooks as the application's arguments: a request slot pointer-wide on the
    // standard ABI, an array as long as its count, a status that may be ignored.
    assert!(tools.contains(
        "counting::std_abi::isend(\"MPI_Isend\", ::core::convert::Into::into(comm), \
         ::core::convert::Into::into(count), ::core::convert::Into::into(datatype), \
         ::core::convert::Into::into(dest), ::core::convert::Into::into($crate::app::AppArg::new(&scope, \
         request.cast::<$crate::ffi::WideHandle>())), move || next("
    ));
    assert!(tools.contains(
        "counting::waitall(\"MPI_Waitall\", ::core::convert::Into::into(count), ::core::convert::Into::into(\
         $crate::app::AppArray::new(&scope, array_of_requests, count as i64)), ::core::convert::Into::into(\
         $crate::app::AppArray::new(&scope, array_of_statuses, count as i64)), move |array_of_statuses: \
         $crate::app::AppArray<'_, $crate::ffi::MPI_Status>| next(count, array_of_requests, array_of_statuses.ptr()))"
    ));
    assert!(tools.contains(&format!(
        "fn MPI_Probe(source: ::std::os::raw::c_int, tag: ::std::os::raw::c_int, comm: {wide}, status: \
         *mut $crate::ffi::MPI_Status) -> ::std::os::raw::c_int {{\n\
         if $crate::abi::standard() {{\n\
         return $crate::next_wide!(MPI_Probe)(source, tag, comm, status);\n}}\n\
         let comm = comm as $crate::ffi::MPI_Comm;\n"
    )));
    // A communicator constructor on the standard ABI: the call, then the explicit policy's hook.
    assert!(lean.contains(
        "if $crate::abi::standard() {\nuse $hooks as hooks;\nreturn unsafe {\n\
         let scope = $crate::app::CallScope::new();\nhooks::std_comm_constructed(\
         $crate::interpose::CommCtor::Dup, comm, $crate::app::AppArg::new(&scope, \
         newcomm.cast::<$crate::ffi::WideHandle>()), || unsafe { \
         $crate::next_wide!(MPI_Comm_dup)(comm, newcomm) })\n};\n}\n"
    ));
    // Every exported interposer of both libraries checks, but MPI_Init* and the completion rows.
    let mut checked = 0;
    for (text, library) in [(&lean, "lean"), (&tools, "tools")] {
        for f in text.split("#[no_mangle]").skip(1) {
            let mut lines = f.lines().skip(2);
            let (signature, first) = (lines.next().unwrap(), lines.next().unwrap());
            let name = signature.split("fn ").nth(1).and_then(|t| t.split('(').next()).unwrap();
            let row = rows.iter().find(|r| r.name == name).unwrap();
            let folded = library == "lean"
                && matches!(row.lean, Some(Lean::Init(_)) | Some(Lean::Test { .. }) | Some(Lean::Wait { .. }));
            assert_eq!(first == "if $crate::abi::standard() {", !folded, "{library}: {name}: {first}");
            for h in HANDLES {
                for end in [",", ")"] {
                    assert!(!signature.contains(&format!(": $crate::ffi::{h}{end}")), "{library}: {name}: {h}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 250, "{checked}");
    assert!(lean.contains("fn MPI_Init(argc: *mut ::std::os::raw::c_int, argv: *mut *mut *mut ::std::os::raw::c_char) -> ::std::os::raw::c_int {\nuse $hooks as hooks;\nunsafe {\nlet scope = $crate::app::CallScope::new();\nhooks::init($crate::app::AppArg::new(&scope, argc), $crate::app::AppArg::new(&scope, argv), None)"));
    // A fix gets every argument, its pointers wrapped; a hook without pointers no scope.
    assert!(lean.contains(
        "fixes::iprobe(source, tag, comm, $crate::app::AppArg::new(&scope, flag), \
         $crate::app::AppArg::new(&scope, status))"
    ));
    assert!(lean.contains("unsafe {\nhooks::finalize()\n}"));
    let forwarders = generate_forwarders(&rows).unwrap();
    assert!(forwarders.contains(
        "pub fn MPI_Iprobe(source: ::std::os::raw::c_int, tag: ::std::os::raw::c_int, \
         comm: $crate::ffi::MPI_Comm, flag: $crate::app::AppArg<'_, ::std::os::raw::c_int>, \
         status: $crate::app::AppArg<'_, $crate::ffi::MPI_Status>) -> ::std::os::raw::c_int {"
    ));
    assert!(forwarders.contains("unsafe { $crate::next!(MPI_Iprobe)(source, tag, comm, flag.ptr(), status.ptr()) }"));
    assert!(lean.contains("if $crate::abi::standard() {\nreturn $crate::next_wide!(MPI_Wait)(request, status);\n}"));
    // The wide twins of the function types.
    let types = generate_fn_types(&rows).unwrap();
    assert!(types.contains(
        "    pub type MPI_Comm_set_errhandler = unsafe extern \"C\" fn(crate::ffi::WideHandle, crate::ffi::WideHandle) \
         -> ::std::os::raw::c_int;"
    ));
    assert!(types.contains(
        "pub type MPI_Comm_set_errhandler = unsafe extern \"C\" fn(crate::ffi::MPI_Comm, crate::ffi::MPI_Errhandler)"
    ));
    // A completion row may not take a handle by value: its pass-through would not narrow it.
    let bad = parse("int MPI_Test(MPI_Request *request, int *flag, MPI_Comm comm);  pmpi lean:test(request)").unwrap();
    assert!(generate_lean(&bad).unwrap_err().contains("may not take a handle by value"));
}

/// A wait polls its non-blocking form with the wait's own arguments and a local flag (or, for
/// `MPI_Waitsome`, `outcount`); a wait naming a row without `lean:test` is refused.
#[test]
fn completion_rows_generate_their_polls() {
    let rows = parse(include_str!("../../mpi.prototypes")).unwrap();
    let lean = generate_lean(&rows).unwrap();
    assert!(lean
        .contains("fixes::completion_wait($crate::app::AppArray::new(&scope, array_of_requests, count as i64), true,"));
    assert!(lean.contains("$crate::next!(MPI_Testall)(count, array_of_requests, &mut flag, array_of_statuses);"));
    assert!(lean.contains("(rc, *outcount != 0)"));
    assert!(lean.contains("fixes::completion_test($crate::app::AppArray::new(&scope, request, 1),"));
    let bad = parse(concat!(
        "int MPI_Test(MPI_Request *request, int *flag);  pmpi\n",
        "int MPI_Wait(MPI_Request *request);  lean:wait(request, MPI_Test)"
    ))
    .unwrap();
    assert!(generate_lean(&bad).unwrap_err().contains("not a row with lean:test"));
}
