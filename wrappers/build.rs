//! Generates, from the list of MPI prototypes `mpi.prototypes`, the Rust that is typed from them (see
//! `src/prototype_list.rs`, `src/prototype_codegen.rs`): the function-pointer types, the PMPI table and
//! the interposer macros of both libraries, into `$OUT_DIR`.
#[path = "src/prototype_codegen.rs"]
mod prototype_codegen;
#[path = "src/prototype_list.rs"]
mod prototype_list;

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=mpi.prototypes");
    println!("cargo:rerun-if-changed=src/prototype_list.rs");
    println!("cargo:rerun-if-changed=src/prototype_codegen.rs");
    println!("cargo:rerun-if-changed=src/prototype_codegen");
    let text = std::fs::read_to_string("mpi.prototypes").expect("wrappers/mpi.prototypes");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    if let Err(e) = generate(&text, Path::new(&out)) {
        eprintln!("wrappers/mpi.prototypes: {e}");
        std::process::exit(1);
    }
}

fn generate(text: &str, out: &Path) -> Result<(), String> {
    let rows = prototype_list::parse(text)?;
    let files = [
        ("fn_types.rs", prototype_codegen::generate_fn_types(&rows)?),
        ("pmpi_table.rs", prototype_codegen::generate_pmpi_table(&rows)),
        ("lean_interposers.rs", prototype_codegen::generate_lean(&rows)?),
        ("tools_interposers.rs", prototype_codegen::generate_tools(&rows)?),
        ("forwarders.rs", prototype_codegen::generate_forwarders(&rows)?),
    ];
    for (name, content) in files {
        std::fs::write(out.join(name), content).map_err(|e| format!("writing {name}: {e}"))?;
    }
    Ok(())
}
