import ArgumentParser
import FerryCore
import Foundation

struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Upload a file (or stdin with '-') as a raw body, or as multipart/form-data with -F.",
        discussion: """
            The server's response body goes to stdout, progress and status to stderr.
            Raw: ferry put FILE URL [-X PUT|POST] [--content-type TYPE]
            Form: ferry put FILE URL -F name=value -F other=@path[;type=mime] [--field NAME]
            Exit 0 on a 2xx answer, 1 otherwise, 2 for bad input (nothing is sent).
            A raw file's upload offers the IETF resumable-upload protocol: a server that supports it keeps what
            arrived, and a cut, a pause or a crash goes on from there (--no-resumable, or [uploads] resumable =
            false, sends plain uploads). --tus speaks tus 1.0 to the creation endpoint URL.
            """
    )

    @Argument(help: "The file to send, or '-' for standard input (a raw body only, sent chunked; cannot be retried).")
    var file: String

    @Argument(help: "The http(s) URL to send it to, or the sftp/scp path to write it to (ending in /: a directory, the file keeps its name).")
    var url: String

    @Option(name: [.customShort("X"), .customLong("method")], help: ArgumentHelp("PUT (default for a raw body) or POST (default with -F).", valueName: "method"))
    var method: String?

    @Option(name: .customLong("content-type"), help: ArgumentHelp("Content type of FILE (default: by its extension).", valueName: "type"))
    var contentType: String?

    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp("Extra request header, 'Name: value'. Repeatable.", valueName: "header"))
    var headers: [String] = []

    @Option(name: [.customShort("F"), .customLong("form")], help: ArgumentHelp("Form field name=value, or a file part name=@path[;type=mime]. Repeatable.", valueName: "field"))
    var form: [String] = []

    @Option(name: .customLong("field"), help: ArgumentHelp("With -F: the form field FILE is sent as.", valueName: "name"))
    var field: String = "file"

    @Flag(name: .customLong("tus"), help: "Upload with tus 1.0: URL is the server's creation endpoint (a raw file only).")
    var tus = false

    @Flag(name: .customLong("no-resumable"), help: "Do not offer the IETF resumable-upload protocol: a cut sends the file again whole.")
    var noResumable = false

    @Flag(name: .customLong("remote-temp"), help: "sftp: write NAME.part on the server and rename it to NAME once whole (what is there under NAME stays until then).")
    var remoteTemp = false

    @Flag(name: [.customShort("r"), .customLong("recursive")], help: "Upload the tree under the directory FILE to URL/ (a WebDAV server, sftp or ftp), keeping its layout (each directory made, then a file per item). Again: only what the server lacks.")
    var recursive = false

    @OptionGroup var filter: TreeFilterOptions

    @OptionGroup var limit: RateLimitOption
    @OptionGroup var netrc: NetrcOption
    @OptionGroup var detach: DetachOption
    @OptionGroup var force: ForceOption
    @OptionGroup var tui: TUIOption
    @OptionGroup var common: CommonOptions

    func run() async throws {
        let config = try common.loadConfig()
        if recursive { return try await runTree(config: config) }
        guard filter.filter.isEmpty else { throw UsageError("--include and --exclude go with -r (a tree's upload)") }
        var spec = try makeSpec()
        try takeRemoteTemp(&spec)
        spec.rateLimit = try limit.rate()
        let netrcFile = try netrc.file()
        spec.netrcFile = netrcFile
        spec.takeAgent(common.sshAgent)
        if spec.upload?.isRepeatable == false {
            // Standard input belongs to this process: it cannot be handed to another engine or resumed later.
            let exitCode = await common.headlessRun(config)
                .run([spec], store: InMemoryQueueStore(), directory: nil, lock: nil, readout: LiveReadout.wanted(noTUI: common.noTUI))
            throw ExitCode(exitCode)
        }
        if tui.tui, !detach.detach {
            guard TerminalUIRun.wanted(noTUI: common.noTUI) else { throw UsageError("--tui needs a terminal") }
            await TerminalUIRun.run(common, config: config, adding: [spec], force: force.force, netrcFile: netrcFile)
        }
        try await submit(common, config: config, specs: [spec], detach: detach.detach, force: force.force,
                         readout: LiveReadout.wanted(noTUI: common.noTUI))
    }

    /// `-r`: the tree's directories made on the server, its files' uploads queued as one batch (TreePut).
    func runTree(config: Config) async throws {
        guard form.isEmpty, !tus, method == nil else { throw UsageError("-r uploads each file as a plain PUT: -F, --tus and -X do not apply") }
        var text = url
        if !text.hasSuffix("/") { text += "/" }
        let target = try InputValidation.url(text)
        guard TransferScheme(target)?.listsDirectories == true else {
            throw UsageError("put -r uploads to WebDAV servers over http(s), and over sftp and ftp; scp cannot list a directory (use sftp://)")
        }
        let source = try InputValidation.readableDirectory(file, relativeTo: FileManager.default.currentDirectoryPath)
        var extraHeaders: [HTTPHeader] = []
        for text in headers { extraHeaders.append(try InputValidation.header(text)) }
        let rate = try limit.rate()
        let netrcFile = try netrc.file()
        let requests = TreeRequests(headers: extraHeaders, netrcFile: netrcFile, sshAgent: common.sshAgent, userAgent: config.userAgent, timeout: config.idleTimeout,
                                     transport: common.transportSettings(config))
        let resumable: ResumableProtocol? = noResumable ? nil : .ietf
        let plan = try await TreePut.plan(source, to: target, requests: requests, filter: filter.filter) { path, url in
            let (upload, destination) = try UploadSpec.to(url, try InputValidation.uploadSource(path), contentType: contentType, form: nil,
                                                          field: field, method: nil, resumable: resumable)
            var spec = TransferSpec(upload: upload, to: destination, headers: extraHeaders)
            try takeRemoteTemp(&spec)
            spec.rateLimit = rate
            spec.netrcFile = netrcFile
            spec.takeAgent(common.sshAgent)
            return spec
        }
        printErrors(plan.report)
        if plan.specs.isEmpty { throw ExitCode(plan.incomplete ? 1 : 0) }
        if tui.tui, !detach.detach {
            guard TerminalUIRun.wanted(noTUI: common.noTUI) else { throw UsageError("--tui needs a terminal") }
            await TerminalUIRun.run(common, config: config, adding: plan.specs, force: force.force, netrcFile: netrcFile, tree: source)
        }
        try await submit(common, config: config, specs: plan.specs, detach: detach.detach, force: force.force,
                         readout: LiveReadout.wanted(noTUI: common.noTUI), incomplete: plan.incomplete, tree: source)
    }

    /// `--remote-temp`, over sftp only (ftp and scp write the name itself; http has no such thing).
    func takeRemoteTemp(_ spec: inout TransferSpec) throws {
        guard remoteTemp else { return }
        guard TransferScheme(spec.url) == .sftp else {
            throw UsageError("--remote-temp works over sftp (it renames the file once whole); \(spec.url.scheme ?? "this scheme") writes the name itself")
        }
        spec.upload?.remoteTemp = true
    }

    func makeSpec() throws -> TransferSpec {
        let target = try InputValidation.url(url)
        var extraHeaders: [HTTPHeader] = []
        for text in headers { extraHeaders.append(try InputValidation.header(text)) }
        let source = try InputValidation.uploadSource(file)
        var parts: [FormPart] = []
        for text in form { parts.append(try InputValidation.formPart(text)) }
        if tus, noResumable { throw UsageError("--tus and --no-resumable contradict each other: choose one") }
        let resumable: ResumableProtocol? = tus ? .tus : noResumable ? nil : .ietf
        let (upload, destination) = try UploadSpec.to(target, source, contentType: contentType, form: form.isEmpty ? nil : parts,
                                                      field: field, method: method, resumable: resumable)
        _ = try BodyPlan.make(for: upload)  // every file checked before anything is sent
        return TransferSpec(upload: upload, to: destination, headers: extraHeaders)
    }
}
