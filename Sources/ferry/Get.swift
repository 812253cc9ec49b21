import ArgumentParser
import FerryCore
import Foundation

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs: add them to the queue and show their progress until they end (the full-screen UI with --tui; plain lines with --no-tui or when stderr is not a terminal).",
        discussion: "Saved paths go to stdout, progress to stderr. Exit 0 when every download succeeded, 1 when any failed, 2 for bad input."
    )

    @Argument(help: "http or https URLs.")
    var urls: [String] = []

    @Option(name: [.customShort("o"), .customLong("dir")], help: ArgumentHelp("Directory to save into (default: the current one; created when missing).", valueName: "dir"))
    var directory: String?

    @Option(name: [.customShort("O"), .customLong("output")], help: ArgumentHelp("File name to save a single URL under.", valueName: "name"))
    var outputName: String?

    @Option(name: .customLong("sha256"), help: ArgumentHelp("Expected SHA-256 (hex) of a single download.", valueName: "hex"))
    var sha256: String?

    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp("Extra request header, 'Name: value'. Repeatable.", valueName: "header"))
    var headers: [String] = []

    @Option(name: [.customShort("i"), .customLong("input-file")], help: ArgumentHelp("Read URLs from FILE, one per line, '#' comments.", valueName: "file"))
    var inputFile: String?

    @Option(name: .customLong("segments"), help: ArgumentHelp("Fetch a large file in N parallel ranges when the server allows (default 1, or [transfers] segments).", valueName: "n"))
    var segments: Int?

    @Flag(name: [.customShort("r"), .customLong("recursive")], help: "Download the tree under URL (an http(s) index or WebDAV, sftp or ftp directory) into -o DIR, keeping its layout. Again: only what is missing or changed; ferry's own copies are updated, other files left alone (see --replace).")
    var recursive = false

    @Option(name: .customLong("depth"), help: ArgumentHelp("With -r: list N levels of directories (1: the start one alone).", valueName: "n"))
    var depth: Int?

    @OptionGroup var filter: TreeFilterOptions

    @Flag(name: .customLong("replace"), help: "With -r: a file in DIR that differs from the server's is replaced even when ferry did not download it (a symlink is still never followed).")
    var replace = false

    @OptionGroup var limit: RateLimitOption
    @OptionGroup var netrc: NetrcOption
    @OptionGroup var detach: DetachOption
    @OptionGroup var force: ForceOption
    @OptionGroup var tui: TUIOption
    @OptionGroup var common: CommonOptions

    func run() async throws {
        let config = try common.loadConfig()
        let netrcFile = try netrc.file()
        let count = segments ?? config.segments
        guard (1...64).contains(count) else { throw UsageError("--segments takes 1 to 64, got \(count)") }
        let rate = try limit.rate()
        /// What every download of the command takes besides its URL.
        func finish(_ spec: inout TransferSpec) {
            if count > 1 { spec.segments = count }
            spec.rateLimit = rate
            spec.netrcFile = netrcFile
            spec.takeAgent(common.sshAgent)
        }
        if recursive {
            var job = try treeJob(config: config)
            finish(&job.template)
            if tui.tui, !detach.detach {
                guard TerminalUIRun.wanted(noTUI: common.noTUI) else { throw UsageError("--tui needs a terminal") }
                await TerminalUIRun.run(common, config: config, walking: job, netrcFile: netrcFile)
            }
            try await submit(common, config: config, walk: job, detach: detach.detach, readout: LiveReadout.wanted(noTUI: common.noTUI))
            return
        }
        // What only a tree's walk uses is refused without one, not ignored.
        if depth != nil || !filter.filter.isEmpty || replace {
            throw UsageError("--depth, --include, --exclude and --replace go with -r (a tree's download)")
        }
        var specs = try makeSpecs(defaultDirectory: config.downloadDirectory)
        for index in specs.indices { finish(&specs[index]) }
        if tui.tui, !detach.detach {
            guard TerminalUIRun.wanted(noTUI: common.noTUI) else { throw UsageError("--tui needs a terminal") }
            await TerminalUIRun.run(common, config: config, adding: specs, force: force.force, netrcFile: netrcFile)
        }
        try await submit(common, config: config, specs: specs, detach: detach.detach, force: force.force,
                         readout: LiveReadout.wanted(noTUI: common.noTUI))
    }

    /// `-r`: the tree to walk (the engine walks it, durably, and downloads what it finds: TreeJob).
    func treeJob(config: Config) throws -> TreeJob {
        guard urls.count == 1, inputFile == nil else { throw UsageError("-r walks one URL's tree") }
        guard outputName == nil, sha256 == nil else { throw UsageError("-O and --sha256 name one file; -r downloads a tree") }
        if let depth, depth < 1 { throw UsageError("--depth takes 1 or more, got \(depth)") }
        let url = try InputValidation.url(urls[0])
        guard let scope = TreeScope(root: url) else {
            throw UsageError("-r walks http(s), sftp and ftp directories; \(TerminalSafe.sanitize(url.scheme ?? "this")) has no listing (scp: use sftp://)")
        }
        var extraHeaders: [HTTPHeader] = []
        for text in headers { extraHeaders.append(try InputValidation.header(text)) }
        let root = try InputValidation.writableDirectory(directory ?? config.downloadDirectory, relativeTo: FileManager.default.currentDirectoryPath)
        return TreeJob(root: scope.root, directory: root, depth: depth, filter: filter.filter, replace: replace,
                       template: TransferSpec(download: scope.root, directory: root, headers: extraHeaders), typed: typedCommand(),
                       force: force.force)
    }

    /// Every input is checked before anything is queued or created.
    func makeSpecs(defaultDirectory: String = ".") throws(UsageError) -> [TransferSpec] {
        var parsed: [URL] = []
        for text in urls { parsed.append(try InputValidation.url(text)) }
        if let inputFile {
            let data = try InputValidation.contents(of: inputFile, what: "URL list")
            parsed += try InputValidation.urlList(contents: String(decoding: data, as: UTF8.self), path: inputFile)
        }
        guard !parsed.isEmpty else { throw UsageError("no URL given (ferry get URL... or -i FILE)") }
        if outputName != nil, parsed.count > 1 { throw UsageError("-O names one file, but \(parsed.count) URLs were given") }
        if sha256 != nil, parsed.count > 1 { throw UsageError("--sha256 checks one file, but \(parsed.count) URLs were given") }
        let digest = try sha256.map { (text: String) throws(UsageError) in try InputValidation.sha256(text) }
        var extraHeaders: [HTTPHeader] = []
        for text in headers { extraHeaders.append(try InputValidation.header(text)) }

        let cwd = FileManager.default.currentDirectoryPath
        var directoryPath = directory ?? defaultDirectory
        var fileName: String?
        if let outputName {
            // -O may carry a directory part, like wget -O path.
            let url = URL(fileURLWithPath: outputName, relativeTo: URL(fileURLWithPath: directoryPath, isDirectory: true))
            let base = url.lastPathComponent
            guard base.utf8.count <= FileNaming.maxNameBytes else {
                throw UsageError("-O names a file of \(base.utf8.count) bytes; at most \(FileNaming.maxNameBytes) fit (with the .part it downloads under)")
            }
            guard outputName.last != "/", let safe = FileNaming.safeBaseName(base), safe == base else {
                throw UsageError("-O needs a plain file name, got '\(TerminalSafe.sanitize(outputName))'")
            }
            fileName = safe
            if outputName.contains("/") { directoryPath = url.deletingLastPathComponent().path }
        }
        let absoluteDirectory = try InputValidation.writableDirectory(directoryPath, relativeTo: cwd)
        return parsed.map { url in
            TransferSpec(download: url, directory: absoluteDirectory, fileName: fileName, sha256: digest, headers: extraHeaders)
        }
    }
}
