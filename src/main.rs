//! The `rosenblatt` command: parses arguments, calls the library, prints, and maps errors
//! to exit codes (0 ok, 1 runtime failure, 2 usage or input error).

mod cli;

fn main() {
    std::process::exit(cli::run());
}
