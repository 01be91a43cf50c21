//! Reads `wrappers/mpi.prototypes` (the list of MPI prototypes and their roles; its header describes the
//! syntax) into rows; `prototype_codegen.rs` writes the Rust generated from them. Compiled twice: into
//! the build script, which writes the generated files, and into the library's unit tests.
//! Only `std`: a build script has no other dependency.

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
    /// A call on a communicator: `fixes::claimed(comm, the call through the next definition)` (the
    /// communicator's stream endpoint claimed for the call, where it has one).
    Claim {
        comm: String,
    },
    /// A call on a request or a matched message handle (`MPI_Request *`, `MPI_Message *`):
    /// `fixes::claimed_request(*handle, the call through the next definition)` (the endpoint the
    /// handle names claimed for the call).
    ClaimRequest {
        handle: String,
    },
    /// A nonblocking point-to-point call that makes a request (`MPI_Isend`, `MPI_Irecv`...):
    /// `fixes::claimed_nonblocking(comm, the call's name, send, request, the call through the next
    /// definition)`: the endpoint claimed as for `Claim`, and the request made noted as a send or not
    /// (`lean:claim_send`, `lean:claim_recv`: a cancel of a send on the policy's streams is routed).
    ClaimNonblocking {
        comm: String,
        request: String,
        send: bool,
    },
    /// `fixes::nonblocking_collective(comm, request, next-definition call on a given comm and request)`.
    Nbc {
        comm: String,
        request: String,
    },
    Persistent {
        comm: String,
        request: String,
    },
    /// A completion call's non-blocking form (`MPI_Test*`): `fixes::completion_test(the requests, a
    /// closure making the call through the next definition)`, after a pass-through check.
    /// `requests`: `[REQUEST]` or `[COUNT, ARRAY]`.
    Test {
        requests: Vec<String>,
    },
    /// A completion call's blocking form (`MPI_Wait*`): `fixes::completion_wait(the requests, whether
    /// all must complete, the call, its non-blocking form `test` polled instead)`, after a pass-through
    /// check.
    Wait {
        requests: Vec<String>,
        test: String,
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
    /// (`MPI_Psend_init`, `Precv_init`), `PointToPointSend` / `PointToPointRecv` (the other
    /// `*send_init` / `*recv_init`, `_c` forms too), else `Collective` (`MPI_Allreduce_init`...).
    pub fn persistent_kind(&self) -> &'static str {
        let n = self.hook_name();
        let n = n.trim_end_matches("_c");
        match n {
            "psend_init" | "precv_init" => "Partitioned",
            _ if n.ends_with("send_init") => "PointToPointSend",
            _ if n.ends_with("recv_init") => "PointToPointRecv",
            _ if self.is_neighbourhood() => "NeighbourhoodCollective",
            _ => "Collective",
        }
    }

    /// A neighbourhood collective (`MPI_Ineighbor_*`, `MPI_Neighbor_*_init`): it needs its
    /// communicator's topology.
    pub fn is_neighbourhood(&self) -> bool {
        self.hook_name().trim_start_matches('i').starts_with("neighbor_")
    }

    pub fn param(&self, name: &str) -> Result<&Param, String> {
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

pub fn is_ident_char(c: char) -> bool {
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
        "lean:claim" => {
            let a = need_args(args)?;
            let [comm] = <[String; 1]>::try_from(a).map_err(|_| "lean:claim takes (COMM)")?;
            check_params(row, std::slice::from_ref(&comm))?;
            expect_type(row, &comm, "MPI_Comm")?;
            set_once(&mut row.lean, Lean::Claim { comm }, "lean")?;
        }
        "lean:claim_request" => {
            let a = need_args(args)?;
            let [handle] = <[String; 1]>::try_from(a).map_err(|_| "lean:claim_request takes (HANDLE)")?;
            check_params(row, std::slice::from_ref(&handle))?;
            let ty = &row.param(&handle)?.c_type;
            if ty != "MPI_Request *" && ty != "MPI_Message *" {
                return Err(format!("`{handle}` must be `MPI_Request *` or `MPI_Message *`, not `{ty}`"));
            }
            set_once(&mut row.lean, Lean::ClaimRequest { handle }, "lean")?;
        }
        "lean:claim_send" | "lean:claim_recv" => {
            let a = need_args(args)?;
            let [comm, request] = <[String; 2]>::try_from(a).map_err(|_| format!("{word} takes (COMM, REQUEST)"))?;
            check_params(row, &[comm.clone(), request.clone()])?;
            expect_type(row, &comm, "MPI_Comm")?;
            expect_type(row, &request, "MPI_Request *")?;
            let send = word == "lean:claim_send";
            set_once(&mut row.lean, Lean::ClaimNonblocking { comm, request, send }, "lean")?;
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
        "lean:test" => {
            let requests = need_args(args)?;
            completion_requests(row, &requests)?;
            set_once(&mut row.lean, Lean::Test { requests }, "lean")?;
        }
        "lean:wait" => {
            let mut requests = need_args(args)?;
            let test =
                requests.pop().filter(|t| t.starts_with("MPI_")).ok_or("lean:wait takes (REQUESTS.., MPI_Test*)")?;
            completion_requests(row, &requests)?;
            set_once(&mut row.lean, Lean::Wait { requests, test }, "lean")?;
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

/// The requests of a completion call: `(REQUEST)` of type `MPI_Request *`, or `(COUNT, ARRAY)` of types
/// `int` and `MPI_Request []`.
fn completion_requests(row: &Row, names: &[String]) -> Result<(), String> {
    match names {
        [request] => expect_type(row, request, "MPI_Request *"),
        [count, array] => {
            expect_type(row, count, "int")?;
            expect_type(row, array, "MPI_Request []")
        }
        _ => Err("a completion call's requests are (REQUEST) or (COUNT, ARRAY)".into()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let of_kind = |kind: &str| -> Vec<&str> {
            persistent.iter().filter(|r| r.persistent_kind() == kind).map(|r| r.name.as_str()).collect()
        };
        let (sends, recvs) = (of_kind("PointToPointSend"), of_kind("PointToPointRecv"));
        // (MPI_Bsend_init has a role of its own: the buffered sends' route.)
        for name in ["MPI_Send_init", "MPI_Ssend_init", "MPI_Rsend_init", "MPI_Send_init_c"] {
            assert!(sends.contains(&name), "{name} is a point-to-point send");
        }
        assert!(recvs.contains(&"MPI_Recv_init"), "MPI_Recv_init is a point-to-point receive");
        assert!(sends.iter().all(|n| n.to_lowercase().contains("send_init")));
        assert!(recvs.iter().all(|n| n.to_lowercase().contains("recv_init")));
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
            rows.iter()
                .find(|r| r.name == name && matches!(r.lean, Some(Lean::Nbc { .. })))
                .unwrap_or_else(|| panic!("{name} listed"))
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
            ("int MPI_Barrier(int comm);  lean:claim(comm)", "expected `MPI_Comm`"),
            ("int MPI_Barrier(MPI_Comm comm);  lean:claim(comm, comm)", "lean:claim takes"),
            ("int MPI_Cancel(MPI_Comm *request);  lean:claim_request(request)", "must be `MPI_Request *`"),
            ("int MPI_Isend(MPI_Comm comm, int request);  lean:claim_send(comm, request)", "expected `MPI_Request *`"),
            ("int MPI_Irecv(MPI_Comm comm);  lean:claim_recv(comm)", "lean:claim_recv takes"),
            ("int MPI_Ibarrier(MPI_Comm comm, int request);  lean:nbc(comm, request)", "expected `MPI_Request *`"),
            ("int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);  pmpi? lean:ctor(Dup, comm, newcomm)", "required"),
            (
                "int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);  pmpi lean:ctor(Dup, comm, newcomm, newcomm)",
                "neither `MPI_Info` nor `MPI_Request *`",
            ),
            ("int MPI_X(int count);  nullable(count)", "not a function pointer"),
            ("int MPI_Test(MPI_Request *request, int *flag);  lean:test(flag)", "expected `MPI_Request *`"),
            ("int MPI_Wait(MPI_Request *request);  lean:wait(request)", "lean:wait takes"),
            ("int MPI_Waitall(int count, MPI_Request r[]);  lean:wait(r, count, MPI_Testall)", "expected `int`"),
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
}
