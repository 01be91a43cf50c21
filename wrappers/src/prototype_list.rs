//! Reads `wrappers/mpi.prototypes` (the list of MPI prototypes and their roles; its header describes the
//! syntax) and writes the Rust generated from it. Compiled twice: into the build script, which writes
//! the generated files, and into the library's unit tests, which test the parser and the C-to-Rust types.
//! Only `std`: a build script has no other dependency.
use std::fmt::Write;

/// One parameter of a prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    /// The C type without the name, normalised: `const int *`, `MPI_Request []`.
    pub c_type: String,
}

/// What the lean library does with a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lean {
    /// `hooks::init(argc, argv, None)`, or `Some((required, provided))` with four parameters.
    Init(Vec<String>),
    /// `hooks::<name>(params)`.
    Hook(Vec<String>),
    /// `hooks::comm_constructed(CommCtor::kind, parent, out, info, request (each `Some` where the row
    /// names one), PMPI call)`.
    Ctor {
        kind: String,
        parent: String,
        out: String,
        info: Option<String>,
        request: Option<String>,
    },
    /// `fixes::<name>(every parameter)`.
    Fix,
    /// `fixes::nonblocking_collective(comm, request, next-definition call on a given comm and request)`.
    Nbc {
        comm: String,
        request: String,
    },
    Persistent {
        comm: String,
        request: String,
    },
}

/// One function of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `MPI_Send`, `MPIX_Stream_create`.
    pub name: String,
    pub params: Vec<Param>,
    /// `Some(optional)` if the function is in the PMPI table.
    pub pmpi: Option<bool>,
    pub nullable: Vec<String>,
    pub lean: Option<Lean>,
    /// The tools library's hook and the parameters it receives.
    pub tools: Option<(String, Vec<String>)>,
    /// The row's first line in the file, for messages.
    pub line: usize,
}

impl Row {
    /// `PMPI_Send`, `PMPIX_Stream_create`.
    pub fn pmpi_name(&self) -> String {
        format!("P{}", self.name)
    }

    /// The name after the `MPI_` prefix, in lower case (`MPI_Comm_free` -> `comm_free`).
    pub fn hook_name(&self) -> String {
        self.name.trim_start_matches("MPIX_").trim_start_matches("MPI_").to_lowercase()
    }

    /// The `interpose::PersistentKind` variant of a persistent request's constructor: `Partitioned`
    /// (`MPI_Psend_init`, `Precv_init`), `PointToPoint` (the other `*send_init`/`*recv_init`, `_c` forms
    /// too), else `Collective` (`MPI_Allreduce_init`...).
    pub fn persistent_kind(&self) -> &'static str {
        let n = self.hook_name();
        let n = n.trim_end_matches("_c");
        match n {
            "psend_init" | "precv_init" => "Partitioned",
            _ if n.ends_with("send_init") || n.ends_with("recv_init") => "PointToPoint",
            _ if self.is_neighbourhood() => "NeighbourhoodCollective",
            _ => "Collective",
        }
    }

    /// A neighbourhood collective (`MPI_Ineighbor_*`, `MPI_Neighbor_*_init`): it needs its
    /// communicator's topology.
    pub fn is_neighbourhood(&self) -> bool {
        self.hook_name().trim_start_matches('i').starts_with("neighbor_")
    }

    fn param(&self, name: &str) -> Result<&Param, String> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("line {}: {} has no parameter `{name}`", self.line, self.name))
    }

    /// The C prototype as one line (what the row says, without its roles).
    pub fn c_prototype(&self, prefix: &str) -> String {
        let params: Vec<String> = self.params.iter().map(c_param).collect();
        let params = if params.is_empty() { "void".to_string() } else { params.join(", ") };
        format!("int {prefix}{}({params})", self.name)
    }
}

fn c_param(p: &Param) -> String {
    match p.c_type.strip_suffix(" []") {
        Some(base) => format!("{base} {}[]", p.name),
        None if p.c_type.ends_with('*') => format!("{}{}", p.c_type, p.name),
        None => format!("{} {}", p.c_type, p.name),
    }
}

/// Parses the whole list.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    // Join continuation lines (those starting with a blank) to their row.
    let mut logical: Vec<(usize, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match logical.last_mut() {
                Some((_, row)) => {
                    row.push(' ');
                    row.push_str(trimmed);
                }
                None => return Err(format!("line {}: a continuation line with no row above", i + 1)),
            }
        } else {
            logical.push((i + 1, trimmed.to_string()));
        }
    }
    let rows = logical.iter().map(|(line, text)| parse_row(*line, text)).collect::<Result<Vec<Row>, String>>()?;
    for (i, r) in rows.iter().enumerate() {
        if let Some(dup) = rows[..i].iter().find(|o| o.name == r.name) {
            return Err(format!("line {}: {} is listed twice (also line {})", r.line, r.name, dup.line));
        }
    }
    Ok(rows)
}

fn parse_row(line: usize, text: &str) -> Result<Row, String> {
    let err = |what: &str| format!("line {line}: {what}: {text}");
    let rest = text.strip_prefix("int ").ok_or_else(|| err("a row must start with `int `"))?;
    let open = rest.find('(').ok_or_else(|| err("no `(`"))?;
    let name = rest[..open].trim().to_string();
    if !(name.starts_with("MPI_") || name.starts_with("MPIX_")) || !name.chars().all(is_ident_char) {
        return Err(err("the function name must be MPI_* or MPIX_*"));
    }
    let close = rest.find(");").ok_or_else(|| err("the prototype must end with `);`"))?;
    let params = parse_params(&rest[open + 1..close]).map_err(|e| err(&e))?;
    let mut row = Row { name, params, pmpi: None, nullable: Vec::new(), lean: None, tools: None, line };
    for role in split_roles(&rest[close + 2..]).map_err(|e| err(&e))? {
        apply_role(&mut row, &role).map_err(|e| err(&e))?;
    }
    if row.pmpi.is_none() && row.lean.is_none() && row.tools.is_none() {
        return Err(err("a row without a role"));
    }
    if matches!(row.lean, Some(Lean::Ctor { .. })) && row.pmpi != Some(false) {
        return Err(err("lean:ctor needs a required `pmpi` row"));
    }
    Ok(row)
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn parse_params(text: &str) -> Result<Vec<Param>, String> {
    let text = text.trim();
    if text == "void" || text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',').map(parse_param).collect()
}

fn parse_param(text: &str) -> Result<Param, String> {
    let mut text = text.trim().to_string();
    let array = text.ends_with("[]");
    if array {
        text.truncate(text.len() - 2);
    }
    let name_start = text.rfind(|c: char| !is_ident_char(c)).map_or(0, |i| i + 1);
    let name = text[name_start..].to_string();
    let ty = text[..name_start].trim();
    if name.is_empty() || ty.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("parameter `{text}` needs a type and a name"));
    }
    // Normalise: words separated by one blank, stars glued together after them.
    let stars = ty.chars().filter(|&c| c == '*').count();
    let words: Vec<&str> = ty.split(|c: char| c.is_whitespace() || c == '*').filter(|w| !w.is_empty()).collect();
    let mut c_type = words.join(" ");
    if stars > 0 {
        c_type.push(' ');
        c_type.push_str(&"*".repeat(stars));
    }
    if array {
        c_type.push_str(" []");
    }
    Ok(Param { name, c_type })
}

/// Splits the roles at blanks outside parentheses.
fn split_roles(text: &str) -> Result<Vec<String>, String> {
    let mut roles = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return Err("unbalanced `)`".into());
        }
        if c.is_whitespace() && depth == 0 {
            if !cur.is_empty() {
                roles.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if depth != 0 {
        return Err("unbalanced `(`".into());
    }
    if !cur.is_empty() {
        roles.push(cur);
    }
    Ok(roles)
}

/// `word(a, b)` -> (`word`, [a, b]); `word` -> (`word`, None).
fn split_call(role: &str) -> Result<(&str, Option<Vec<String>>), String> {
    match role.find('(') {
        None => Ok((role, None)),
        Some(i) => {
            let inner = role[i + 1..].strip_suffix(')').ok_or_else(|| format!("role `{role}`: text after `)`"))?;
            let args: Vec<String> = inner.split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
            Ok((&role[..i], Some(args)))
        }
    }
}

fn apply_role(row: &mut Row, role: &str) -> Result<(), String> {
    let (word, args) = split_call(role)?;
    let no_args = |args: &Option<Vec<String>>| match args {
        None => Ok(()),
        Some(_) => Err(format!("role `{word}` takes no parameters")),
    };
    let need_args = |args: Option<Vec<String>>| args.ok_or_else(|| format!("role `{word}` needs its parameters"));
    match word {
        "pmpi" | "pmpi?" => {
            no_args(&args)?;
            set_once(&mut row.pmpi, word == "pmpi?", word)?;
        }
        "nullable" => {
            for p in need_args(args)? {
                let ty = &row.param(&p)?.c_type;
                if !(ty.ends_with("_function *")) {
                    return Err(format!("nullable({p}): `{ty}` is not a function pointer"));
                }
                row.nullable.push(p);
            }
        }
        "lean:init" => {
            let a = need_args(args)?;
            if a.len() != 2 && a.len() != 4 {
                return Err("lean:init takes (argc, argv) or (argc, argv, required, provided)".into());
            }
            check_params(row, &a)?;
            set_once(&mut row.lean, Lean::Init(a), "lean")?;
        }
        "lean:hook" => {
            let a = need_args(args)?;
            check_params(row, &a)?;
            set_once(&mut row.lean, Lean::Hook(a), "lean")?;
        }
        "lean:fix" => {
            no_args(&args)?;
            set_once(&mut row.lean, Lean::Fix, "lean")?;
        }
        "lean:nbc" => {
            let a = need_args(args)?;
            let [comm, request] = <[String; 2]>::try_from(a).map_err(|_| "lean:nbc takes (COMM, REQUEST)")?;
            check_params(row, &[comm.clone(), request.clone()])?;
            expect_type(row, &request, "MPI_Request *")?;
            set_once(&mut row.lean, Lean::Nbc { comm, request }, "lean")?;
        }
        "lean:persistent" => {
            let a = need_args(args)?;
            let [comm, request] = <[String; 2]>::try_from(a).map_err(|_| "lean:persistent takes (COMM, REQUEST)")?;
            check_params(row, &[comm.clone(), request.clone()])?;
            expect_type(row, &comm, "MPI_Comm")?;
            expect_type(row, &request, "MPI_Request *")?;
            set_once(&mut row.lean, Lean::Persistent { comm, request }, "lean")?;
        }
        "lean:ctor" => {
            const USAGE: &str = "lean:ctor takes (KIND, PARENT, OUT[, INFO][, REQUEST])";
            let mut a = need_args(args)?;
            if !(3..=5).contains(&a.len()) {
                return Err(USAGE.into());
            }
            // The optional arguments, told apart by their parameters' types.
            let (mut info, mut request) = (None, None);
            for extra in a.split_off(3) {
                check_params(row, std::slice::from_ref(&extra))?;
                let slot = match row.param(&extra)?.c_type.as_str() {
                    "MPI_Info" => &mut info,
                    "MPI_Request *" => &mut request,
                    t => return Err(format!("parameter `{extra}` is `{t}`, neither `MPI_Info` nor `MPI_Request *`")),
                };
                if slot.replace(extra).is_some() {
                    return Err(USAGE.into());
                }
            }
            let [kind, parent, out] = <[String; 3]>::try_from(a).map_err(|_| USAGE)?;
            check_params(row, &[parent.clone(), out.clone()])?;
            expect_type(row, &parent, "MPI_Comm")?;
            expect_type(row, &out, "MPI_Comm *")?;
            if !kind.chars().all(is_ident_char) {
                return Err(format!("lean:ctor: `{kind}` is not a CommCtor variant"));
            }
            set_once(&mut row.lean, Lean::Ctor { kind, parent, out, info, request }, "lean")?;
        }
        _ => match word.strip_prefix("tools:") {
            Some(hook) if !hook.is_empty() && hook.chars().all(is_ident_char) => {
                let a = need_args(args)?;
                check_params(row, &a)?;
                set_once(&mut row.tools, (hook.to_string(), a), "tools")?;
            }
            _ => return Err(format!("unknown role `{role}`")),
        },
    }
    Ok(())
}

fn set_once<T>(slot: &mut Option<T>, value: T, what: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("two `{what}` roles"));
    }
    *slot = Some(value);
    Ok(())
}

fn check_params(row: &Row, names: &[String]) -> Result<(), String> {
    names.iter().try_for_each(|n| row.param(n).map(|_| ()))
}

fn expect_type(row: &Row, name: &str, c_type: &str) -> Result<(), String> {
    let p = row.param(name)?;
    if p.c_type != c_type {
        return Err(format!("parameter `{name}` is `{}`, expected `{c_type}`", p.c_type));
    }
    Ok(())
}

/// The Rust type of a C parameter type. `ffi` prefixes MPI's types (`crate::ffi::`, `$crate::ffi::`).
pub fn rust_type(c_type: &str, nullable: bool, ffi: &str) -> Result<String, String> {
    let array = c_type.ends_with(" []");
    let ty = c_type.trim_end_matches(" []");
    let stars = ty.chars().filter(|&c| c == '*').count() + usize::from(array);
    let words: Vec<&str> = ty.split(' ').filter(|w| !w.is_empty() && !w.starts_with('*')).collect();
    let (is_const, base) = match words.as_slice() {
        ["const", base] => (true, *base),
        [base] => (false, *base),
        _ => return Err(format!("unsupported C type `{c_type}`")),
    };
    if base.ends_with("_function") {
        // A function-pointer typedef: `MPI_X_function *f` is the Rust fn type `MPI_X_function`.
        if stars != 1 || is_const {
            return Err(format!("unsupported function-pointer type `{c_type}`"));
        }
        return Ok(if nullable { format!("Option<{ffi}{base}>") } else { format!("{ffi}{base}") });
    }
    if nullable {
        return Err(format!("`{c_type}` is not a function pointer"));
    }
    let mut rust = match base {
        "int" => "::std::os::raw::c_int".to_string(),
        "char" => "::std::os::raw::c_char".to_string(),
        "double" => "f64".to_string(),
        "void" if stars > 0 => "::std::os::raw::c_void".to_string(),
        _ if (base.starts_with("MPI_") || base.starts_with("MPIX_")) && base.chars().all(is_ident_char) => {
            format!("{ffi}{base}")
        }
        _ => return Err(format!("unsupported C type `{c_type}`")),
    };
    for level in 0..stars {
        // `const` qualifies what the innermost pointer points to.
        let qualifier = if level == 0 && is_const { "*const" } else { "*mut" };
        rust = format!("{qualifier} {rust}");
    }
    if is_const && stars == 0 {
        return Err(format!("unsupported C type `{c_type}` (a const value parameter)"));
    }
    Ok(rust)
}

fn rust_params(row: &Row, ffi: &str) -> Result<Vec<(String, String)>, String> {
    row.params
        .iter()
        .map(|p| {
            let ty = rust_type(&p.c_type, row.nullable.contains(&p.name), ffi)
                .map_err(|e| format!("line {}: {}: {e}", row.line, row.name))?;
            Ok((p.name.clone(), ty))
        })
        .collect()
}

fn fn_type(row: &Row, ffi: &str) -> Result<String, String> {
    let types: Vec<String> = rust_params(row, ffi)?.into_iter().map(|(_, t)| t).collect();
    Ok(format!("unsafe extern \"C\" fn({}) -> ::std::os::raw::c_int", types.join(", ")))
}

const GENERATED: &str =
    "// Generated by wrappers/build.rs from wrappers/mpi.prototypes: edit the list, not this file.\n";

/// `fn_types.rs`: one function-pointer type per row, named after the function.
pub fn generate_fn_types(rows: &[Row]) -> Result<String, String> {
    let mut s = String::from(GENERATED);
    for r in rows {
        writeln!(s, "/// `{};`", r.c_prototype("")).unwrap();
        writeln!(s, "pub type {} = {};", r.name, fn_type(r, "crate::ffi::")?).unwrap();
    }
    Ok(s)
}

/// `pmpi_table.rs`: the struct of resolved `PMPI_*` entry points and its resolver.
pub fn generate_pmpi_table(rows: &[Row]) -> String {
    let mut s = String::from(GENERATED);
    s.push_str("/// Function pointers into the loaded MPICH.\npub struct Pmpi {\n");
    for r in rows {
        let Some(optional) = r.pmpi else { continue };
        let ty = format!("crate::fn_types::{}", r.name);
        let ty = if optional { format!("Option<{ty}>") } else { ty };
        writeln!(s, "    pub {}: {ty},", r.pmpi_name()).unwrap();
    }
    s.push_str(
        "}\n\nimpl Pmpi {\n\
         \x20   /// Resolves every row; a missing required symbol is an error naming it.\n\
         \x20   pub unsafe fn resolve(find: &dyn Fn(&::std::ffi::CStr) -> *mut ::std::os::raw::c_void) -> Result<Pmpi, String> {\n\
         \x20       Ok(Pmpi {\n",
    );
    for r in rows {
        let Some(optional) = r.pmpi else { continue };
        let (pname, name) = (r.pmpi_name(), &r.name);
        if optional {
            writeln!(
                s,
                "            {pname}: {{\n\
                 \x20               let p = find(c\"{pname}\");\n\
                 \x20               if p.is_null() {{ None }} else {{ Some(::std::mem::transmute::<*mut ::std::os::raw::c_void, crate::fn_types::{name}>(p)) }}\n\
                 \x20           }},"
            )
            .unwrap();
        } else {
            writeln!(
                s,
                "            {pname}: {{\n\
                 \x20               let p = find(c\"{pname}\");\n\
                 \x20               if p.is_null() {{\n\
                 \x20                   return Err(\"the loaded MPI library has no {pname}\".to_string());\n\
                 \x20               }}\n\
                 \x20               ::std::mem::transmute::<*mut ::std::os::raw::c_void, crate::fn_types::{name}>(p)\n\
                 \x20           }},"
            )
            .unwrap();
        }
    }
    s.push_str("        })\n    }\n}\n");
    s
}

fn signature(row: &Row, ffi: &str) -> Result<String, String> {
    let params: Vec<String> = rust_params(row, ffi)?.into_iter().map(|(n, t)| format!("{n}: {t}")).collect();
    Ok(format!("pub unsafe extern \"C\" fn {}({}) -> ::std::os::raw::c_int", row.name, params.join(", ")))
}

fn all_args(row: &Row) -> String {
    row.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
}

const FN_ATTRS: &str = "#[no_mangle]\n#[allow(non_snake_case, unused_unsafe, clippy::too_many_arguments, \
     clippy::missing_safety_doc)]\n";

/// `lean_interposers.rs`: the `interposers!($hooks, $fixes)` macro of the lean library.
pub fn generate_lean(rows: &[Row]) -> Result<String, String> {
    let mut s = String::from(GENERATED);
    s.push_str(
        "/// Defines every `MPI_*` interposer of the lean library (the rows of wrappers/mpi.prototypes with a\n\
         /// `lean:` role) over the hooks module `$hooks` (`init`, `finalize`, `comm_free`, `error_class`,\n\
         /// `comm_constructed`) and the module `$fixes` (the native-defect routes and `nonblocking_collective`).\n\
         #[macro_export]\nmacro_rules! interposers {\n    ($hooks:path, $fixes:path) => {\n",
    );
    for r in rows {
        let Some(lean) = &r.lean else { continue };
        let body = match lean {
            Lean::Init(a) if a.len() == 2 => format!("use $hooks as hooks;\nhooks::init({}, {}, None)", a[0], a[1]),
            Lean::Init(a) => format!("use $hooks as hooks;\nhooks::init({}, {}, Some(({}, {})))", a[0], a[1], a[2], a[3]),
            Lean::Hook(a) => format!("use $hooks as hooks;\nhooks::{}({})", r.hook_name(), a.join(", ")),
            Lean::Fix => format!(
                "use $fixes as fixes;\n$crate::guard::ffi_guard(\"{}\", || unsafe {{ fixes::{}({}) }})",
                r.name,
                r.hook_name(),
                all_args(r)
            ),
            Lean::Ctor { kind, parent, out, info, request } => format!(
                "use $hooks as hooks;\nhooks::comm_constructed($crate::interpose::CommCtor::{kind}, {parent}, {out}, {}, {}, \
                 &|p: &$crate::pmpi::Pmpi| (p.{})({}))",
                info.as_ref().map_or_else(|| "None".to_string(), |i| format!("Some({i})")),
                request.as_ref().map_or_else(|| "None".to_string(), |r| format!("Some({r})")),
                r.pmpi_name(),
                all_args(r)
            ),
            Lean::Nbc { comm, request } => format!(
                "use $fixes as fixes;\n\
                 $crate::guard::ffi_guard(\"{}\", || unsafe {{\n\
                 // Through the next definition, so that the tools library still counts it; on the communicator\n\
                 // the hook picks (the application's, or the plain base of a policy communicator).\n\
                 fixes::nonblocking_collective({comm}, {request}, {}, &|_: &$crate::pmpi::Pmpi, {comm}: $crate::ffi::MPI_Comm, \
                 {request}: *mut $crate::ffi::MPI_Request| unsafe {{\n\
                 $crate::next!({})({})\n}})\n}})",
                r.name,
                r.is_neighbourhood(),
                r.name,
                all_args(r)
            ),
            Lean::Persistent { comm, request } => format!(
                "use $fixes as fixes;\n\
                 fixes::persistent_created({comm}, {request}, $crate::interpose::PersistentKind::{}, \
                 &|{comm}: $crate::ffi::MPI_Comm| unsafe {{ $crate::next!({})({}) }})",
                r.persistent_kind(),
                r.name,
                all_args(r)
            ),
        };
        writeln!(s, "{FN_ATTRS}{} {{\n{body}\n}}\n", signature(r, "$crate::ffi::")?).unwrap();
    }
    s.push_str("    };\n}\n");
    Ok(s)
}

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
        let mut closure_params = Vec::new();
        let mut passed = Vec::new();
        for a in args {
            passed.push(format!("::core::convert::Into::into({a})"));
            if r.param(a)?.c_type == "MPI_Status *" {
                closure_params.push(format!("{a}: *mut $crate::ffi::MPI_Status"));
            }
        }
        writeln!(
            s,
            "{FN_ATTRS}{} {{\n\
             use $counting as counting;\n\
             let next = $crate::next!({name});\n\
             $crate::guard::ffi_guard(\"{name}\", move || unsafe {{\n\
             counting::{hook}(\"{name}\", {passed}move |{cp}| next({all}))\n}})\n}}\n",
            signature(r, "$crate::ffi::")?,
            name = r.name,
            passed = passed.iter().map(|p| format!("{p}, ")).collect::<String>(),
            cp = closure_params.join(", "),
            all = all_args(r),
        )
        .unwrap();
    }
    s.push_str("    };\n}\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in ["void", "unsigned int", "float", "const int", "MPI_Comm_copy_attr_function **"] {
            assert!(rust_type(bad, false, "ffi::").is_err(), "{bad}");
        }
        assert!(rust_type("int *", true, "ffi::").is_err());
    }

    #[test]
    fn rows_parse_with_continuations_and_roles() {
        let text = "# a comment\n\
                    int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,\n    \
                    int dest, MPI_Comm comm, MPI_Status *status);\n    pmpi lean:fix tools:sendrecv(comm, sendcount, status)\n\
                    int MPI_Finalize(void);  pmpi lean:hook()\n\
                    int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);  pmpi?\n";
        let rows = parse(text).unwrap();
        assert_eq!(rows.len(), 3);
        let sr = &rows[0];
        assert_eq!(sr.name, "MPI_Sendrecv");
        assert_eq!(sr.line, 2);
        assert_eq!(sr.params.len(), 6);
        assert_eq!(sr.params[0], Param { name: "sendbuf".into(), c_type: "const void *".into() });
        assert_eq!(sr.pmpi, Some(false));
        assert_eq!(sr.lean, Some(Lean::Fix));
        assert_eq!(sr.tools, Some(("sendrecv".into(), vec!["comm".into(), "sendcount".into(), "status".into()])));
        assert!(rows[1].params.is_empty());
        assert_eq!(rows[1].lean, Some(Lean::Hook(vec![])));
        assert_eq!(rows[1].hook_name(), "finalize");
        assert_eq!(rows[2].pmpi, Some(true));
        assert_eq!(rows[2].params[2].c_type, "MPI_Status []");
        // What the C check redeclares is the row itself.
        assert_eq!(
            rows[2].c_prototype("P"),
            "int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])"
        );
        assert_eq!(rows[1].c_prototype(""), "int MPI_Finalize(void)");
    }

    #[test]
    fn persistent_constructors_are_told_apart_by_name() {
        let rows = parse(include_str!("../mpi.prototypes")).unwrap();
        let persistent: Vec<&Row> = rows.iter().filter(|r| matches!(r.lean, Some(Lean::Persistent { .. }))).collect();
        let p2p: Vec<&str> =
            persistent.iter().filter(|r| r.persistent_kind() == "PointToPoint").map(|r| r.name.as_str()).collect();
        // (MPI_Bsend_init has a role of its own: the buffered sends' route.)
        for name in ["MPI_Send_init", "MPI_Ssend_init", "MPI_Rsend_init", "MPI_Recv_init", "MPI_Send_init_c"] {
            assert!(p2p.contains(&name), "{name} is point-to-point");
        }
        assert!(p2p.iter().all(|n| n.to_lowercase().contains("send_init") || n.to_lowercase().contains("recv_init")));
        for name in ["MPI_Psend_init", "MPI_Precv_init"] {
            let row = persistent.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} listed"));
            assert_eq!(row.persistent_kind(), "Partitioned");
        }
        for name in ["MPI_Barrier_init", "MPI_Allreduce_init", "MPI_Alltoallw_init", "MPI_Reduce_scatter_init"] {
            let row = persistent.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} listed"));
            assert_eq!(row.persistent_kind(), "Collective", "{name} is a collective");
        }
        for name in ["MPI_Neighbor_allgather_init", "MPI_Neighbor_alltoallw_init_c"] {
            let row = persistent.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} listed"));
            assert_eq!(row.persistent_kind(), "NeighbourhoodCollective", "{name} needs the topology");
        }
        // Nonblocking ones: only the neighbourhood forms need the communicator's topology.
        let nbc = |name: &str| {
            rows.iter().find(|r| r.name == name && matches!(r.lean, Some(Lean::Nbc { .. }))).unwrap_or_else(|| panic!("{name} listed"))
        };
        for name in ["MPI_Ineighbor_allgather", "MPI_Ineighbor_alltoallw_c"] {
            assert!(nbc(name).is_neighbourhood(), "{name}");
        }
        for name in ["MPI_Ibarrier", "MPI_Iallreduce_c", "MPI_Ialltoallw", "MPI_Ireduce_scatter"] {
            assert!(!nbc(name).is_neighbourhood(), "{name}");
        }
    }

    #[test]
    fn bad_rows_are_rejected_with_their_line() {
        let bad = [
            ("int MPI_Send(int count);  tools:send(comm)", "no parameter `comm`"),
            ("int MPI_Send(int count);", "without a role"),
            ("int MPI_Send(int count);  pmpi pmpi", "two `pmpi`"),
            ("int MPI_Send(int count);  lean:frobnicate", "unknown role"),
            ("int MPI_Ibarrier(MPI_Comm comm, int request);  lean:nbc(comm, request)", "expected `MPI_Request *`"),
            ("int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);  pmpi? lean:ctor(Dup, comm, newcomm)", "required"),
            (
                "int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);  pmpi lean:ctor(Dup, comm, newcomm, newcomm)",
                "neither `MPI_Info` nor `MPI_Request *`",
            ),
            ("int MPI_X(int count);  nullable(count)", "not a function pointer"),
            ("int Foo(int count);  pmpi", "MPI_* or MPIX_*"),
            ("void MPI_X(int count);  pmpi", "start with `int `"),
            ("int MPI_X(int count);  pmpi\nint MPI_X(int count);  pmpi", "listed twice"),
            ("    pmpi", "continuation"),
        ];
        for (text, why) in bad {
            let e = parse(text).unwrap_err();
            assert!(e.contains(why) && e.contains("line "), "{text}: {e}");
        }
    }

    #[test]
    fn the_list_parses_and_generates() {
        let rows = parse(include_str!("../mpi.prototypes")).unwrap();
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
        assert!(generate_pmpi_table(&rows)
            .contains("pub PMPIX_Stream_create: Option<crate::fn_types::MPIX_Stream_create>,"));
    }
}
