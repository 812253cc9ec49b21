import ArgumentParser
import FerryCore
import Foundation

/// `--detach` of `get` and `put`.
struct DetachOption: ParsableArguments {
    @Flag(name: .customLong("detach"), help: "Queue the items with the engine (starting one in the background if none runs), print their ids and return at once.")
    var detach = false
}

/// `get` and `put` without the UI: this process becomes the engine and works until its items are done, or,
/// when an engine runs, hands them to it and follows them to the end (or, with --detach, returns at once).
func submit(_ common: CommonOptions, config: Config, specs: [TransferSpec], detach: Bool) async throws {
    let readsStandardInput = specs.contains { $0.upload?.primarySource == .standardInput }
    if detach {
        guard !readsStandardInput else { throw UsageError("--detach cannot hand over an upload from standard input: this process reads it") }
        let client = try EngineStartup.attach(common)
        let ids = try add(specs, to: client)
        print(ids.map(\.description).joined(separator: " "))
        return
    }
    switch try EngineStartup.begin(common.stateDirectory) {
    case let .engine(lock, store):
        let status = await common.headlessRun(config)
            .run(specs, store: store, directory: common.stateDirectory, lock: lock)
        throw ExitCode(status)
    case let .running(client):
        if readsStandardInput {
            // Standard input is this process's: the upload runs here, on a queue of its own.
            client.close()
            let status = await common.headlessRun(config)
                .run(specs, store: InMemoryQueueStore(), directory: nil, lock: nil)
            throw ExitCode(status)
        }
        let ids = try add(specs, to: client)
        printError("handed \(ids.count) item(s) to the running engine: \(ids.map(\.description).joined(separator: " "))")
        throw ExitCode(await Follow.run(client, ids: Set(ids)))
    }
}

/// Queues `specs` with the engine behind `client`; their ids.
func add(_ specs: [TransferSpec], to client: ControlClient) throws -> [TransferID] {
    var request = ControlRequest(id: 0, verb: .add)
    request.specs = specs
    let reply = try QueueVerb.send(request, client)
    return (reply.ids ?? []).map(TransferID.init)
}
