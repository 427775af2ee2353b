//! `mailroom`: the command-line entry point.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mailroom_app::{
    accounts::{operator_add_member, operator_remove_member, AddMemberRequest},
    console::create_login_link,
    operations::rotate_secrets,
    users::{bootstrap_user, BootstrapRequest},
};
use mailroom_domain::AccountId;
use mailroom_server::{
    application::{build_services, prepare_database, spawn_metrics_listener},
    inbound, render_sandbox,
    system::SystemClock,
    telemetry, workers, Application, Config,
};
use serde::Serialize;

#[derive(Parser)]
#[command(
    name = "mailroom",
    version,
    about = "Self-hosted email delivery and audience service"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API, and run the workers unless MAILROOM_WORKERS=false.
    Serve,
    /// Run the background workers only.
    Worker,
    /// Run the inbound SMTP listener only: bounces and complaints to VERP return paths
    /// (MAILROOM_INBOUND_LISTEN, 0.0.0.0:25 when unset).
    Inbound,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Re-seal every stored secret under MAILROOM_SECRET_KEY (opening old values with
    /// MAILROOM_SECRET_KEY_PREVIOUS); prints one JSON summary. Idempotent.
    RotateSecrets {
        /// Rows re-sealed per transaction.
        #[arg(long, default_value_t = 500)]
        batch_size: u32,
    },
    /// Render messages read from standard input (started by the workers; see
    /// `render_sandbox`).
    #[command(name = "render-sandbox", hide = true)]
    RenderSandbox,
    /// Manage users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage the members of an account; prints the membership as one JSON object.
    Member {
        #[command(subcommand)]
        command: MemberCommand,
    },
}

#[derive(Subcommand)]
enum MemberCommand {
    /// Add a user (created if unknown, without a token) to an account.
    Add {
        /// The account's id.
        #[arg(long)]
        account: String,
        /// The user's email address.
        #[arg(long)]
        email: String,
        /// The role to give.
        #[arg(long, default_value = "member", value_parser = ["admin", "member"])]
        role: String,
    },
    /// Remove a user from an account (never its owner); their tokens get 401 on it from
    /// their next request.
    Remove {
        /// The account's id.
        #[arg(long)]
        account: String,
        /// The user's email address.
        #[arg(long)]
        email: String,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Membership {
    account_id: String,
    user_id: String,
    email: String,
    role: &'static str,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create the user if absent and issue a personal access token; prints one JSON object.
    Create {
        /// The user's email address.
        #[arg(long)]
        email: String,
        /// Label of the token.
        #[arg(long, default_value = "bootstrap")]
        token_name: String,
        /// Token lifetime in days: 30, 60 or 90 (default: never expires).
        #[arg(long, value_parser = ["30", "60", "90"])]
        expires_in_days: Option<String>,
    },
    /// Print a one-time sign-in link to the console for an existing user (valid 15
    /// minutes, usable once); prints one JSON object with `url` and `expiresAt`.
    LoginLink {
        /// The user's email address.
        #[arg(long)]
        email: String,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrintedLoginLink {
    url: String,
    expires_at: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreatedUser {
    user_id: String,
    token_id: String,
    token: String,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if matches!(cli.command, Command::RenderSandbox) {
        // Before anything else: the child has no configuration, secrets or logging.
        return render_sandbox::serve_render_sandbox().context("the render sandbox");
    }
    telemetry::init();
    let mut config = Config::from_env()?;
    // The workers render in children of this very binary (render_sandbox).
    config.render_program = std::env::current_exe().ok();
    match cli.command {
        Command::RenderSandbox => Ok(()),
        Command::Migrate => prepare_database(&config.database_url),
        Command::User {
            command:
                UserCommand::Create {
                    email,
                    token_name,
                    expires_in_days,
                },
        } => create_user(&config, email, token_name, expires_in_days),
        Command::User {
            command: UserCommand::LoginLink { email },
        } => print_login_link(&config, &email),
        Command::Member { command } => manage_member(&config, command),
        Command::RotateSecrets { batch_size } => rotate(&config, batch_size),
        Command::Serve => serve(config),
        Command::Inbound => {
            prepare_database(&config.database_url)?;
            let (services, database) = build_services(&config, Arc::new(SystemClock))?;
            if let Some(address) = config.metrics_listen {
                let port = spawn_metrics_listener(address, services.clone(), database)?;
                tracing::info!(%address, port, "serving /metrics");
            }
            let address = config
                .inbound
                .listen
                .unwrap_or_else(|| inbound::DEFAULT_INBOUND_LISTEN.into());
            let listener = inbound::bind_inbound(&config, address, services)?;
            tracing::info!(%address, port = listener.local_addr()?.port(), "inbound SMTP listening");
            runtime()?.block_on(async move {
                tokio::select! {
                    served = listener.run() => served,
                    signal = workers::wait_for_shutdown_signal() => signal,
                }
            })?;
            tracing::info!("inbound SMTP stopped");
            Ok(())
        }
        Command::Worker => {
            prepare_database(&config.database_url)?;
            let (services, database) = build_services(&config, Arc::new(SystemClock))?;
            if let Some(address) = config.metrics_listen {
                let port = spawn_metrics_listener(address, services.clone(), database)?;
                tracing::info!(%address, port, "serving /metrics");
            }
            runtime()?.block_on(workers::run_until_shutdown(services, &config))?;
            Ok(())
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn serve(config: Config) -> Result<()> {
    let run_workers = config.run_workers;
    // actix-web's server runs on actix's system runtime; workers join it as tasks.
    actix_web::rt::System::new().block_on(async move {
        let application = Application::build(&config)?;
        tracing::info!(listen = %config.listen, port = application.port(), "mailroom serving");
        if let Some(port) = application.inbound_port() {
            tracing::info!(port, "inbound SMTP listening");
        }
        if run_workers {
            let (services, config) = (application.services(), config.clone());
            actix_web::rt::spawn(
                async move { workers::run_until_shutdown(services, &config).await },
            );
        }
        application.run_until_stopped().await?;
        tracing::info!("mailroom stopped");
        Ok(())
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RotatedColumn {
    column: &'static str,
    resealed: u64,
    already_current: u64,
    changed_meanwhile: u64,
    unreadable: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rotation {
    /// True when every stored secret opens with MAILROOM_SECRET_KEY alone: the previous
    /// key may be dropped.
    complete: bool,
    resealed: u64,
    columns: Vec<RotatedColumn>,
}

fn rotate(config: &Config, batch_size: u32) -> Result<()> {
    prepare_database(&config.database_url)?;
    // One connection, as for `user create`: a short command must not exit while a pool
    // thread is still connecting.
    let mut one_connection = config.clone();
    one_connection.db_pool_size = 1;
    let (services, _) = build_services(&one_connection, Arc::new(SystemClock))?;
    let summary = rotate_secrets(&services, batch_size).map_err(|e| anyhow::anyhow!("{e}"))?;
    let output = Rotation {
        complete: summary.complete(),
        resealed: summary.columns.iter().map(|c| c.resealed).sum(),
        columns: summary
            .columns
            .into_iter()
            .map(|c| RotatedColumn {
                column: c.column.name(),
                resealed: c.resealed,
                already_current: c.already_current,
                changed_meanwhile: c.changed_meanwhile,
                unreadable: c.unreadable,
            })
            .collect(),
    };
    #[allow(clippy::print_stdout)] // The one JSON object on stdout is this command's contract.
    {
        println!("{}", serde_json::to_string(&output)?);
    }
    if !output.complete {
        anyhow::bail!(
            "some stored secrets open with neither MAILROOM_SECRET_KEY nor MAILROOM_SECRET_KEY_PREVIOUS (listed as `unreadable`); keep the previous key until they are re-entered"
        );
    }
    Ok(())
}

fn manage_member(config: &Config, command: MemberCommand) -> Result<()> {
    let account_text = match &command {
        MemberCommand::Add { account, .. } | MemberCommand::Remove { account, .. } => account,
    };
    let account = AccountId::parse(account_text)
        .map_err(|_| anyhow::anyhow!("--account {account_text:?} is not an account id"))?;
    prepare_database(&config.database_url)?;
    // One connection, as in `create_user`.
    let mut one_connection = config.clone();
    one_connection.db_pool_size = 1;
    let (services, _) = build_services(&one_connection, Arc::new(SystemClock))?;
    let member = match command {
        MemberCommand::Add { email, role, .. } => operator_add_member(
            &services,
            account,
            AddMemberRequest {
                email: Some(email),
                role: Some(role),
            },
        ),
        MemberCommand::Remove { email, .. } => operator_remove_member(&services, account, &email),
    }
    .map_err(|e| match e {
        mailroom_app::AppError::NotFound => {
            anyhow::anyhow!("no such account, or the user is not a member of it")
        }
        other => anyhow::anyhow!("{other}"),
    })?;
    let output = Membership {
        account_id: account.to_string(),
        user_id: member.user_id.to_string(),
        email: member.email,
        role: member.role.as_str(),
    };
    #[allow(clippy::print_stdout)] // One JSON object on stdout, like `user create`.
    {
        println!("{}", serde_json::to_string(&output)?);
    }
    Ok(())
}

fn print_login_link(config: &Config, email: &str) -> Result<()> {
    prepare_database(&config.database_url)?;
    // One connection, as in `create_user`.
    let mut one_connection = config.clone();
    one_connection.db_pool_size = 1;
    let (services, _) = build_services(&one_connection, Arc::new(SystemClock))?;
    let link = create_login_link(&services, email).map_err(|e| match e {
        mailroom_app::AppError::NotFound => {
            anyhow::anyhow!(
                "no user has the email {email:?}; create one with `mailroom user create`"
            )
        }
        other => anyhow::anyhow!("{other}"),
    })?;
    let output = PrintedLoginLink {
        url: format!(
            "{}/console/login/{}",
            config.public_url.trim_end_matches('/'),
            link.secret.expose()
        ),
        expires_at: link.expires_at.to_string(),
    };
    #[allow(clippy::print_stdout)] // One JSON object on stdout, like `user create`.
    {
        println!("{}", serde_json::to_string(&output)?);
    }
    Ok(())
}

fn create_user(
    config: &Config,
    email: String,
    token_name: String,
    expires_in_days: Option<String>,
) -> Result<()> {
    prepare_database(&config.database_url)?;
    // One connection, so the pool never has a connection attempt in flight on a background
    // thread when this short command exits: libpq (through OpenSSL's exit handlers) can
    // crash if `exit` runs while another thread is inside a connect.
    let mut one_connection = config.clone();
    one_connection.db_pool_size = 1;
    let (services, _) = build_services(&one_connection, Arc::new(SystemClock))?;
    let expires_in_days = expires_in_days
        .map(|days| days.parse::<i64>())
        .transpose()?;
    let created = bootstrap_user(
        &services,
        BootstrapRequest {
            email,
            token_name,
            expires_in_days,
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let output = CreatedUser {
        user_id: created.user_id.to_string(),
        token_id: created.token.record.id.to_string(),
        token: created.token.raw.expose().to_owned(),
    };
    #[allow(clippy::print_stdout)] // The one JSON object on stdout is this command's contract.
    {
        println!("{}", serde_json::to_string(&output)?);
    }
    Ok(())
}
