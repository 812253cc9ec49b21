import ArgumentParser
import FerryCore
import Foundation

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "A terminal upload/download manager with resume, retries and a durable queue.",
        discussion: "Shell completion: ferry --generate-completion-script bash (or zsh, fish) prints a script to source.",
        // What `--version` prints is FerryVersion.text, made in main when argument-parser asks for this line.
        version: versionLine,
        subcommands: [Get.self, Put.self, List.self, Run.self, Pause.self, Resume.self, Cancel.self, Retry.self, Remove.self,
                      Limit.self, Move.self, Jobs.self, Stop.self, RPC.self, Version.self, BackgroundEngine.self]
    )

    /// Options that may come before the subcommand (`ferry --config F list`) as well as after it.
    static let globalOptions: Set<String> = ["--config", "--state-dir"]

    /// Moves global options written before the subcommand to just after it, where the subcommand parses them.
    static func reorder(_ arguments: [String]) -> [String] {
        let subcommands = Set(configuration.subcommands.map { $0._commandName })
        guard let commandIndex = arguments.firstIndex(where: { subcommands.contains($0) }) else { return arguments }
        var moved: [String] = []
        var rest: [String] = []
        var index = 0
        while index < commandIndex {
            let argument = arguments[index]
            let name = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
            if globalOptions.contains(name) {
                moved.append(argument)
                if !argument.contains("="), index + 1 < commandIndex {
                    moved.append(arguments[index + 1])
                    index += 1
                }
            } else {
                rest.append(argument)
            }
            index += 1
        }
        return rest + [arguments[commandIndex]] + moved + arguments[(commandIndex + 1)...]
    }

    @OptionGroup var common: CommonOptions

    /// No subcommand: the terminal UI on the queue.
    func run() async throws {
        let config = try common.loadConfig()
        guard TerminalUIRun.wanted(noTUI: common.noTUI) else {
            throw UsageError("the queue UI needs a terminal; use ferry run, or ferry get/put with --no-tui, to work headless")
        }
        // (An unparsed NetrcOption() would trap on its first property: argument-parser's wrappers hold no value.)
        let netrcFile = try NetrcOption.file(named: nil, off: false)
        await TerminalUIRun.run(common, config: config, adding: [], netrcFile: netrcFile)
    }

    /// What the user gave cannot be used (a usage error, a config file, a body file, the state directory):
    /// the message that names it. These exit 2.
    static func userMessage(_ error: Error) -> String? {
        switch error {
        case let error as UsageError: error.description
        case let error as ConfigError: error.description
        case let error as BodyError: error.description
        case let error as StateError: error.description
        default: nil
        }
    }

    /// The configuration's version: what argument-parser answers `--version` with (by its own rules of where the
    /// flag counts), which main replaces with FerryVersion.text. That text is made only then: libcurl's version
    /// line (`curl_version`) starts OpenLDAP, which reads its config and loads every SASL plugin, 3-4 ms of a start.
    static let versionLine = "ferry \(FerryVersion.number)"

    /// Usage errors exit 2 (ArgumentParser's default is 64); everything else keeps its code.
    static func main() async {
        SharedStores.makeCookieStorageWithoutADirectory()
        do {
            var command = try parseAsRoot(reorder(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .success, fullMessage(for: error) == versionLine {
                print(FerryVersion.text)
                Foundation.exit(0)
            }
            if let message = userMessage(error) {
                Output.error("ferry: \(message)\n")
                Foundation.exit(2)
            }
            if let error = error as? ControlError {
                Output.error("ferry: \(error.description)\n")
                Foundation.exit(1)
            }
            let code = exitCode(for: error)
            if code == .validationFailure {
                Output.error(fullMessage(for: error) + "\n")
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// `ferry version`: the same as `ferry --version`.
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the version, the Swift it was built with and the transport.")
    func run() { print(FerryVersion.text) }
}

/// Options every subcommand takes.
/// `--include` and `--exclude` of `get -r` and `put -r`: which files of the tree are taken (TreeFilter).
struct TreeFilterOptions: ParsableArguments {
    @Option(name: .customLong("include"), help: ArgumentHelp("With -r: take only files matching GLOB (on the name, or on the path with a /). Repeatable.", valueName: "glob"))
    var include: [String] = []

    @Option(name: .customLong("exclude"), help: ArgumentHelp("With -r: leave files matching GLOB. Repeatable.", valueName: "glob"))
    var exclude: [String] = []

    var filter: TreeFilter { TreeFilter(include: include, exclude: exclude) }
}

/// `--limit-rate` of `get` and `put`: a bandwidth limit for each item they queue.
struct RateLimitOption: ParsableArguments {
    // Whatever follows is the rate, `-1` included (refused in words, not taken for an option).
    @Option(name: .customLong("limit-rate"), parsing: .unconditional,
            help: ArgumentHelp("Bandwidth limit per item (with -r: the tree's, shared by its files), e.g. 500K, 2M, 1.5MiB (K, M, KiB, MiB = 1024; KB, MB = 1000; 0 = none).", valueName: "rate"))
    var limitRate: String?

    /// Bytes per second, nil for none; a bad value is a usage error naming it (exit 2).
    func rate() throws(UsageError) -> Int64? {
        guard let limitRate else { return nil }
        do throws(UsageError) {
            return try RateText.parse(limitRate)
        } catch {
            throw UsageError("--limit-rate: \(error.description)")
        }
    }
}

/// `--netrc-file` and `--no-netrc` of `get` and `put`: whose logins the queued items send.
struct NetrcOption: ParsableArguments {
    @Option(name: .customLong("netrc-file"), help: ArgumentHelp("Logins for hosts from FILE, in .netrc form (default: $NETRC, else ~/.netrc when it exists).", valueName: "file"))
    var netrcFile: String?

    @Flag(name: .customLong("no-netrc"), help: "Send no login from a .netrc file.")
    var noNetrc = false

    func validate() throws {
        if noNetrc, netrcFile != nil { throw ValidationError("--netrc-file and --no-netrc cannot be used together") }
    }

    /// The file the items use (absolute), checked now: unreadable or malformed is a usage error naming it;
    /// one that others can read gives a warning on stderr. nil: none.
    func file(environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> String? {
        try Self.file(named: netrcFile, off: noNetrc, environment: environment)
    }

    /// The same for a command without these options (the UI alone): the default file, if any.
    static func file(named netrcFile: String?, off noNetrc: Bool,
                     environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> String? {
        guard !noNetrc, let path = netrcFile ?? Netrc.defaultPath(environment: environment) else { return nil }
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        do {
            let (_, warning) = try Netrc.check(path: absolute)
            if let warning { printError("warning: \(warning)") }
            return absolute
        } catch where netrcFile == nil {
            // A file the user did not name here (~/.netrc, $NETRC) does not stop the transfer: it is left out.
            printError("warning: \(error.description); its logins are not used")
            return nil
        }
    }
}

/// Where the queue and the config are: every command's options (a verb's `--help` lists only what it takes).
struct StateOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where the queue is kept (default: $FERRY_STATE_DIR, else $XDG_STATE_HOME/ferry).", valueName: "dir"))
    var stateDir: String?

    @Option(name: .customLong("config"), help: ArgumentHelp("Config file (default: $FERRY_CONFIG, else $XDG_CONFIG_HOME/ferry/config.toml).", valueName: "file"))
    var config: String?

    var stateDirectory: StateDirectory { StateDirectory(option: stateDir) }

    func loadConfig() throws(ConfigError) -> Config { try Config.load(option: config) }
}

/// The options of the commands that run transfers or a UI (`ferry`, get, put, run, the engine): where, and how.
struct CommonOptions: ParsableArguments {
    @OptionGroup var state: StateOptions

    /// This shell session's ssh-agent (`SSH_AUTH_SOCK`): the sftp and scp items it asks for log in with it
    /// (TransferSpec.sshAgent), whichever engine carries them.
    /// (getenv: ProcessInfo copies the whole environment at each read, 5 % of a 2,000-URL get's CPU read per URL.)
    var sshAgent: String? { getenv("SSH_AUTH_SOCK").map { String(cString: $0) } }

    @Flag(name: .customLong("no-tui"), help: "Run without the terminal UI (implied when stdout is not a terminal).")
    var noTUI = false

    @Option(name: .customShort("j"), help: ArgumentHelp("Transfers at once (default 4, or [transfers] concurrency).", valueName: "n"))
    var jobs: Int?

    @Option(name: .customLong("retries"), help: ArgumentHelp("Retries after a failed attempt (default 5, or [retry] attempts).", valueName: "n"))
    var retries: Int?

    func validate() throws {
        if let jobs, !ConcurrencyCaps.range.contains(jobs) {
            throw ValidationError("-j needs a number from \(ConcurrencyCaps.range.lowerBound) to \(ConcurrencyCaps.range.upperBound), got \(jobs)")
        }
        if let retries, retries < 0 { throw ValidationError("--retries needs 0 or more, got \(retries)") }
    }

    var config: String? { state.config }
    var stateDirectory: StateDirectory { state.stateDirectory }

    func loadConfig() throws(ConfigError) -> Config { try state.loadConfig() }

    /// This process as a headless engine, with the config's hooks logging to the state directory's log.
    func headlessRun(_ config: Config) -> HeadlessRun {
        HeadlessRun(configuration: engineConfiguration(config), hooks: config.hooks, logPath: stateDirectory.logPath)
    }

    /// Proxies and CAs from the environment as curl reads them; the config's ca_file wins. The engine's items and
    /// the requests a tree makes itself (its listings, `put -r`'s MKCOLs) are sent with them.
    func transportSettings(_ config: Config) -> TransportSettings {
        var settings = TransportSettings.fromEnvironment(ProcessInfo.processInfo.environment)
        if let caFile = config.caFile { settings.caFile = caFile }
        return settings
    }

    /// The config file's settings, the changes made while an engine ran (LiveSettings: transfers at once and
    /// the global limits) over them, and the command line's on top (`-j` for this run only).
    func engineConfiguration(_ config: Config) -> EngineConfiguration {
        var configuration = config.engine
        let (live, problem) = LiveSettings.load(stateDirectory.liveSettingsPath)
        if let problem { printError("warning: \(problem)") }
        if let concurrency = live.concurrency, ConcurrencyCaps.range.contains(concurrency) { configuration.maxConcurrent = concurrency }
        if let limits = live.limits {
            configuration.downloadLimit = limits.download
            configuration.uploadLimit = limits.upload
        }
        configuration.liveSettingsPath = stateDirectory.liveSettingsPath
        configuration.transport = transportSettings(config)
        if let jobs { configuration.maxConcurrent = jobs }
        if let retries { configuration.retry.maxRetries = retries }
        return configuration
    }
}
