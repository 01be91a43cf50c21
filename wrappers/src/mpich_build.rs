//! Names the MPI build a process runs on, exactly enough to tell two installs apart: MPICH's version,
//! the netmod in use and the path of the loaded MPI library, e.g.
//! `MPICH 4.1.3, netmod ch4:ofi (default of ch4:ofi ucx), /opt/mpich/lib/libmpi.so.12.3.3`; for Intel
//! MPI, its own first line and its fabrics (`I_MPI_FABRICS`).
//! Used by the banner (`MPIXSTREAM_VERBOSE=1`) and the report (its `library` field).
//!
//! The netmod: an MPICH built with several netmods (PyPI's wheels: `MPICH Device: ch4:ofi ucx`) uses
//! the one `MPIR_CVAR_CH4_NETMOD` names, else the first one listed; libfabric's provider is added for
//! `ofi` where `FI_PROVIDER` chooses it. The path: the file that defines `PMPI_Init` in this process
//! (`dladdr`), with its symbolic links resolved.

/// The one-line description. `version_text` is `MPI_Get_library_version`'s text; `env` reads the
/// environment (a parameter, so that tests need not set variables); `library_path` the loaded library.
pub fn describe(version_text: &str, env: impl Fn(&str) -> Option<String>, library_path: Option<&str>) -> String {
    let path = library_path.unwrap_or("library path unknown");
    let Some(version) = field(version_text, "MPICH Version:") else {
        let first = version_text.lines().next().map(str::trim).unwrap_or_default();
        if first.starts_with("Intel(R) MPI Library") {
            // Intel MPI (an MPICH derivative) says no MPICH version; its transports are I_MPI_FABRICS.
            return format!("{first}, {}, {path}", intel_fabrics(&env));
        }
        // Not MPICH: its first line is the best name we have.
        let first = version_text.lines().next().map(str::trim).filter(|l| !l.is_empty());
        return format!("{}, {path}", first.unwrap_or("unknown MPI library"));
    };
    let device = field(version_text, "MPICH Device:").unwrap_or_default();
    format!("MPICH {version}, {}, {path}", netmod(&device, &env))
}

/// "netmod ch4:ucx" for a device line "ch4:ucx", or, for several netmods, which one and why.
fn netmod(device: &str, env: &impl Fn(&str) -> Option<String>) -> String {
    let mut words = device.split_whitespace();
    let Some(first) = words.next() else {
        return "device unknown".into();
    };
    let Some((dev, first_netmod)) = first.split_once(':') else {
        return format!("device {first}");
    };
    let built: Vec<&str> = std::iter::once(first_netmod).chain(words).collect();
    let chosen = env("MPIR_CVAR_CH4_NETMOD").map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty());
    let (netmod, why) = match chosen {
        Some(v) if built.contains(&v.as_str()) => (v, "MPIR_CVAR_CH4_NETMOD".to_string()),
        Some(v) => (v, format!("MPIR_CVAR_CH4_NETMOD, not among the built {dev}:{}", built.join(" "))),
        None if built.len() > 1 => (built[0].to_string(), format!("default of {dev}:{}", built.join(" "))),
        None => (built[0].to_string(), String::new()),
    };
    let provider = match env("FI_PROVIDER").filter(|p| !p.is_empty()) {
        Some(p) if netmod == "ofi" => format!(", provider {p}"),
        _ => String::new(),
    };
    match (why.is_empty(), provider.is_empty()) {
        (true, true) => format!("netmod {dev}:{netmod}"),
        (true, false) => format!("netmod {dev}:{netmod} ({})", &provider[2..]),
        (false, _) => format!("netmod {dev}:{netmod} ({why}{provider})"),
    }
}

/// The netmod an MPICH build uses in this process ("ucx", "ofi"): the one `MPIR_CVAR_CH4_NETMOD`
/// names, else the first one built; None where the text names no ch4 netmod (not MPICH, ch3).
pub fn netmod_in_use(version_text: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let device = field(version_text, "MPICH Device:")?;
    let mut words = device.split_whitespace();
    let (_, first) = words.next()?.split_once(':')?;
    let chosen = env("MPIR_CVAR_CH4_NETMOD").map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty());
    Some(chosen.unwrap_or_else(|| first.to_string()))
}

/// Intel MPI's transports: "fabrics shm (I_MPI_FABRICS)", with libfabric's provider where `ofi` is
/// among them and `FI_PROVIDER` chooses it.
fn intel_fabrics(env: &impl Fn(&str) -> Option<String>) -> String {
    let Some(fabrics) = env("I_MPI_FABRICS").map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty()) else {
        return "fabrics Intel MPI's default (I_MPI_FABRICS unset)".into();
    };
    match env("FI_PROVIDER").filter(|p| !p.is_empty()) {
        Some(p) if fabrics.split(':').any(|f| f == "ofi") => format!("fabrics {fabrics} (I_MPI_FABRICS, provider {p})"),
        _ => format!("fabrics {fabrics} (I_MPI_FABRICS)"),
    }
}

/// The value after `key` on its line of `MPI_Get_library_version`'s text.
fn field(text: &str, key: &str) -> Option<String> {
    let line = text.lines().find(|l| l.trim_start().starts_with(key))?;
    let value = line.trim_start()[key.len()..].trim();
    (!value.is_empty()).then(|| value.to_string())
}

pub use crate::dl::library_path_of;

#[cfg(test)]
mod tests {
    use super::*;

    const MPICH5: &str = "MPICH Version:      5.0.2\nMPICH Release date: Fri\nMPICH Device:       ch4:ucx ofi\n";
    const MPICH413: &str = "MPICH Version:      4.1.3\nMPICH Device:       ch4:ofi ucx\n";
    const DEBIAN: &str = "MPICH Version:\t4.0.2\nMPICH Release date:\tThu\nMPICH Device:\tch4:ucx\n";

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn netmod_in_use_is_the_chosen_or_the_first_built() {
        assert_eq!(netmod_in_use(MPICH5, env(&[])).as_deref(), Some("ucx"));
        assert_eq!(netmod_in_use(MPICH413, env(&[])).as_deref(), Some("ofi"));
        assert_eq!(netmod_in_use(MPICH413, env(&[("MPIR_CVAR_CH4_NETMOD", "UCX")])).as_deref(), Some("ucx"));
        assert_eq!(netmod_in_use("Intel(R) MPI Library 2021", env(&[])), None);
    }

    #[test]
    fn one_netmod() {
        assert_eq!(
            describe(DEBIAN, env(&[]), Some("/usr/lib/libmpich.so.12.2.2")),
            "MPICH 4.0.2, netmod ch4:ucx, /usr/lib/libmpich.so.12.2.2"
        );
    }

    #[test]
    fn several_netmods_default_is_the_first() {
        assert_eq!(
            describe(MPICH5, env(&[]), Some("/p/libmpi.so.12")),
            "MPICH 5.0.2, netmod ch4:ucx (default of ch4:ucx ofi), /p/libmpi.so.12"
        );
        assert_eq!(
            describe(MPICH413, env(&[("FI_PROVIDER", "tcp")]), None),
            "MPICH 4.1.3, netmod ch4:ofi (default of ch4:ofi ucx, provider tcp), library path unknown"
        );
    }

    #[test]
    fn netmod_chosen_by_mpich_variable() {
        assert_eq!(
            describe(MPICH5, env(&[("MPIR_CVAR_CH4_NETMOD", "OFI"), ("FI_PROVIDER", "tcp")]), Some("/p/libmpi.so.12")),
            "MPICH 5.0.2, netmod ch4:ofi (MPIR_CVAR_CH4_NETMOD, provider tcp), /p/libmpi.so.12"
        );
        assert_eq!(
            describe(MPICH5, env(&[("MPIR_CVAR_CH4_NETMOD", "ucx"), ("FI_PROVIDER", "tcp")]), Some("/p")),
            "MPICH 5.0.2, netmod ch4:ucx (MPIR_CVAR_CH4_NETMOD), /p"
        );
        assert!(describe(MPICH5, env(&[("MPIR_CVAR_CH4_NETMOD", "psm9")]), None).contains("not among the built"));
    }

    #[test]
    fn not_mpich() {
        assert_eq!(describe("Open MPI v5.0\nmore", env(&[]), Some("/x")), "Open MPI v5.0, /x");
        assert_eq!(describe("", env(&[]), None), "unknown MPI library, library path unknown");
    }

    #[test]
    fn intel_mpi_names_its_fabrics() {
        const IMPI: &str = "Intel(R) MPI Library 2021.19.0 for Linux* OS\n\n";
        assert_eq!(
            describe(IMPI, env(&[("I_MPI_FABRICS", "shm")]), Some("/i/libmpi.so.12")),
            "Intel(R) MPI Library 2021.19.0 for Linux* OS, fabrics shm (I_MPI_FABRICS), /i/libmpi.so.12"
        );
        assert_eq!(
            describe(IMPI, env(&[("I_MPI_FABRICS", "shm:ofi"), ("FI_PROVIDER", "tcp")]), None),
            "Intel(R) MPI Library 2021.19.0 for Linux* OS, fabrics shm:ofi (I_MPI_FABRICS, provider tcp), library path unknown"
        );
        assert_eq!(
            describe(IMPI, env(&[("FI_PROVIDER", "tcp")]), Some("/i")),
            "Intel(R) MPI Library 2021.19.0 for Linux* OS, fabrics Intel MPI's default (I_MPI_FABRICS unset), /i"
        );
    }

    #[test]
    fn path_of_a_libc_function() {
        let p = library_path_of(libc::getpid as *const () as usize).expect("dladdr finds libc");
        assert!(p.contains("libc"), "{p}");
    }
}
