mod backend_client;
mod backend_interop;
mod cli;
mod demo_server;
mod fault_backend_selftest;
mod gateway;
mod support;
